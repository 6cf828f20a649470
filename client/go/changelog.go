package breakerd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// changeLogInterval is the shortest time between two lines of one kind.
const changeLogInterval = 10 * time.Second

// logClock is where a changeLog reads the time and schedules its held-back
// line: the real clock in production, a hand-moved one in tests.
type logClock struct {
	now func() time.Time
	// afterFunc runs f once after d and returns a function that cancels it.
	afterFunc func(d time.Duration, f func()) (stop func())
}

var realClock = logClock{
	now: time.Now,
	afterFunc: func(d time.Duration, f func()) func() {
		t := time.AfterFunc(d, f)
		return func() { t.Stop() }
	},
}

// changeLine is one direction's latest line.
type changeLine struct {
	level slog.Level
	msg   string
	args  []any
}

// changeLog writes the lines of one condition that goes wrong and right
// again (breakerd unreachable / back, Reports failing / accepted, the Watch
// stream lost / back), rate limited so that a flapping condition cannot
// flood the log (client/README.md, "Fail-open"; the same as the Java
// client's ChangeLog and the Node client's change-log.ts).
//
// Each direction (the "wrong" line and the "right" line) is logged at most
// once per changeLogInterval, so one outage logs both of its lines at once.
// A change that comes sooner is not logged but counted; the next line says
// how many changes were not logged. When changes were held back, one line
// with the current state (the latest line of that direction) is logged as
// soon as that direction's interval allows, so the last line always tells
// how things are.
//
// The log owns the condition's state, which starts right: wrong and right
// change it (a call that changes nothing is ignored and returns false), so
// concurrent callers cannot leave the log saying the opposite of the last
// change. Lines are written under mu, in the order of the changes. Safe for
// concurrent use.
type changeLog struct {
	// Constant after newChangeLog.
	logger   *slog.Logger
	clock    logClock
	interval time.Duration

	wrongNow atomic.Bool // written under mu; read without it as a cheap hint

	mu           sync.Mutex
	latest       [2]changeLine // guarded by mu; per direction (index 0 right, 1 wrong)
	lastLoggedAt [2]time.Time  // guarded by mu; zero: never logged
	unlogged     int           // guarded by mu; changes not logged since the last line
	stopFlush    func()        // guarded by mu; the pending flush, nil if none
	closed       bool          // guarded by mu
}

func newChangeLog(logger *slog.Logger, clock logClock) *changeLog {
	return &changeLog{logger: logger, clock: clock, interval: changeLogInterval}
}

// isWrong says whether the condition is wrong now (a hint for hot paths).
func (l *changeLog) isWrong() bool { return l.wrongNow.Load() }

// wrong records that the condition went wrong: logs msg (slog key-value
// args) or counts the change. False, doing nothing, if it was already wrong.
func (l *changeLog) wrong(level slog.Level, msg string, args ...any) bool {
	return l.change(true, changeLine{level, msg, args})
}

// right records that the condition is right again. False, doing nothing, if
// it was already right.
func (l *changeLog) right(level slog.Level, msg string, args ...any) bool {
	return l.change(false, changeLine{level, msg, args})
}

// close drops a held-back line (the client is closed); later changes are
// still tracked and logged.
func (l *changeLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.stopFlush != nil {
		l.stopFlush()
		l.stopFlush = nil
	}
}

func (l *changeLog) change(toWrong bool, line changeLine) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrongNow.Load() == toWrong {
		return false
	}
	l.wrongNow.Store(toWrong)
	l.latest[dirIndex(toWrong)] = line
	now := l.clock.now()
	if l.mayLog(toWrong, now) {
		l.emit(now)
	} else {
		l.unlogged++
		l.scheduleFlush(toWrong, now)
	}
	return true
}

// flush logs the held-back state once its direction's interval is over.
func (l *changeLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopFlush = nil
	if l.unlogged == 0 || l.closed {
		return // a change since then was logged, with the count
	}
	now, dir := l.clock.now(), l.wrongNow.Load()
	if l.mayLog(dir, now) {
		l.emit(now)
	} else {
		l.scheduleFlush(dir, now)
	}
}

// emit writes the current direction's latest line. REQUIRES: mu held,
// mayLog for the current direction.
func (l *changeLog) emit(now time.Time) {
	i := dirIndex(l.wrongNow.Load())
	line := l.latest[i]
	msg, args := line.msg, line.args
	if l.unlogged > 0 {
		word := "changes"
		if l.unlogged == 1 {
			word = "change"
		}
		msg += fmt.Sprintf(" (%d %s not logged since the previous line)", l.unlogged, word)
		args = append(args[:len(args):len(args)], "changes_not_logged", l.unlogged)
	}
	l.lastLoggedAt[i] = now
	l.unlogged = 0
	l.logger.Log(context.Background(), line.level, msg, args...)
}

// mayLog: a line of this direction was never written, or not within the
// interval. REQUIRES: mu held.
func (l *changeLog) mayLog(toWrong bool, now time.Time) bool {
	last := l.lastLoggedAt[dirIndex(toWrong)]
	return last.IsZero() || now.Sub(last) >= l.interval
}

// scheduleFlush arms the one pending flush, for when the direction's
// interval ends; it re-checks what to write when it runs. REQUIRES: mu held.
func (l *changeLog) scheduleFlush(toWrong bool, now time.Time) {
	if l.stopFlush != nil || l.closed {
		return
	}
	delay := l.lastLoggedAt[dirIndex(toWrong)].Add(l.interval).Sub(now)
	l.stopFlush = l.clock.afterFunc(max(delay, 0), l.flush)
}

func dirIndex(wrong bool) int {
	if wrong {
		return 1
	}
	return 0
}
