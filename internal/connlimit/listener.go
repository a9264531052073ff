// Package connlimit bounds what clients can hold of the daemon through its
// listeners (the plugin socket, the metrics address): a cap on each
// listener's open connections that sheds the longest idle one first, the
// time limits of a connection, and the split of the process's file
// descriptors between the caps, so that together they cannot run the
// process out of them.
package connlimit

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener caps the open connections of a listener. At the cap, a new
// connection closes the one that has waited longest without a request in
// progress (idle, or still sending its request), so that clients holding
// connections open cannot lock out the ones that use theirs; only when
// every connection is serving a request is the new one closed instead.
type Listener struct {
	net.Listener
	max  int
	warn func(closed int64) // see New

	closed   atomic.Int64 // connections closed at the cap
	lastWarn atomic.Int64 // unix seconds

	mu    sync.Mutex // guards the fields below and every conn's busy, since and evicted
	conns map[*conn]struct{}
}

// New caps the open connections of l at max. warn, if not nil, is called
// (unlocked) when connections are closed at the cap, at most once a
// minute, with how many have been closed so far.
func New(l net.Listener, max int, warn func(closed int64)) *Listener {
	return &Listener{Listener: l, max: max, warn: warn, conns: make(map[*conn]struct{})}
}

// Max is the cap.
func (l *Listener) Max() int { return l.max }

// Open reports how many connections are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Accept returns the next connection, once the cap has room for it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &conn{Conn: c, l: l, since: time.Now()}
		var victim *conn
		l.mu.Lock()
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if o.busy == 0 && (victim == nil || o.since.Before(victim.since)) {
					victim = o
				}
			}
			if victim == nil {
				l.mu.Unlock()
				c.Close()
				l.closedOne()
				continue
			}
			delete(l.conns, victim)
			victim.evicted = true
		}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
			l.closedOne()
		}
		return tc, nil
	}
}

// closedOne counts a connection closed at the cap and warns at most once a
// minute.
func (l *Listener) closedOne() {
	n := l.closed.Add(1)
	now := time.Now().Unix()
	last := l.lastWarn.Load()
	if l.warn == nil || now-last < 60 || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.warn(n)
}

// conn is a connection counted by its Listener.
type conn struct {
	net.Conn
	l       *Listener
	once    sync.Once
	busy    int       // requests in progress; guarded by l.mu
	since   time.Time // accepted, or its last request ended; guarded by l.mu
	evicted bool      // closed for a newcomer; guarded by l.mu
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// begin marks a request in progress on the connection: it is not closed
// for a newcomer until end. It reports false when the connection was
// already closed for one: its answer could not be sent, so the request
// must not run.
func (c *conn) begin() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.evicted {
		return false
	}
	c.busy++
	return true
}

func (c *conn) end() {
	c.l.mu.Lock()
	c.busy--
	c.since = time.Now()
	c.l.mu.Unlock()
}

type connKey struct{}

// ConnContext is http.Server.ConnContext for a server on a Listener: it
// lets handlers find their connection (see Busy).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// Busy marks the request's connection as serving a request until the
// returned function is called, so that it is not closed for a newcomer
// meanwhile; ok is false when it is already closed (the request must then
// not run). A request on a connection of no Listener is always ok.
func Busy(ctx context.Context) (done func(), ok bool) {
	tc, tracked := ctx.Value(connKey{}).(*conn)
	if !tracked {
		return func() {}, true
	}
	if !tc.begin() {
		return nil, false
	}
	return tc.end, true
}
