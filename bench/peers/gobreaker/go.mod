module breakerd/bench/peers/gobreaker

go 1.22.0

require github.com/sony/gobreaker/v2 v2.4.0
