//go:build !race

package breakerd_test

// raceDetector: the tests run under -race, which slows this process 5-10x.
const raceDetector = false
