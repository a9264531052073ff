package plugin

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Connection limits. Docker's plugin client opens one connection per call
// in flight and keeps two idle ones; a container start or stop makes its
// calls one after the other, so an engine holds about as many connections
// as it starts and stops containers at once (50 in make e2e-reliability).
// DefaultMaxConns is 20 times that; at about 20 KiB of buffers and stack per
// connection the cap also bounds their memory to ~20 MiB.
const (
	DefaultMaxConns = 1024
	// fdReserve is what the daemon keeps for everything but connections:
	// state and CDI files, netlink sockets, sysfs reads.
	fdReserve = 256
	minConns  = 64
)

// Timeouts of a connection. Docker sends a request in one write and reads
// the answer at once; a client slower than these is broken or hostile.
const (
	headerTimeout = 10 * time.Second // request line and headers
	bodyTimeout   = 15 * time.Second // the whole request, headers included
	writeTimeout  = 10 * time.Second // writing one answer
	idleTimeout   = 30 * time.Second // a kept-alive connection between requests
)

// connLimit returns the cap on open connections for a process whose
// RLIMIT_NOFILE soft limit is nofile: DefaultMaxConns, or less when the
// limit would run out first (accept would then fail with EMFILE and no
// client would be served at all).
func connLimit(nofile uint64) int {
	if nofile < DefaultMaxConns+fdReserve {
		if nofile <= minConns+fdReserve {
			return minConns
		}
		return int(nofile - fdReserve)
	}
	return DefaultMaxConns
}

// processConnLimit is connLimit for this process.
func processConnLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return DefaultMaxConns
	}
	return connLimit(rl.Cur)
}

// limitListener caps the open connections of a listener. At the cap, a new
// connection closes the one that has waited longest without a call in
// progress (idle, or still sending its request), so that clients holding
// connections open cannot lock out Docker; only when every connection is
// running a call is the new one closed instead.
type limitListener struct {
	net.Listener
	max    int
	onDrop func(evicted bool) // called (unlocked) for each connection closed at the cap

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func newLimitListener(l net.Listener, max int, onDrop func(evicted bool)) *limitListener {
	return &limitListener{Listener: l, max: max, onDrop: onDrop, conns: make(map[*trackedConn]struct{})}
}

// Open reports how many connections are open.
func (l *limitListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l, since: time.Now()}
		var victim *trackedConn
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
				if l.onDrop != nil {
					l.onDrop(false)
				}
				continue
			}
			delete(l.conns, victim)
			victim.evicted = true
		}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
			if l.onDrop != nil {
				l.onDrop(true)
			}
		}
		return tc, nil
	}
}

// trackedConn is a connection counted by its limitListener.
type trackedConn struct {
	net.Conn
	l       *limitListener
	once    sync.Once
	busy    int       // calls in progress; guarded by l.mu
	since   time.Time // accepted, or its last call ended; guarded by l.mu
	evicted bool      // closed for a newcomer; guarded by l.mu
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// begin marks a call in progress on the connection: it is not closed for a
// newcomer until end. It reports false when the connection was already
// closed for one: its answer could not be sent, so the call must not run.
func (c *trackedConn) begin() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.evicted {
		return false
	}
	c.busy++
	return true
}

func (c *trackedConn) end() {
	c.l.mu.Lock()
	c.busy--
	c.since = time.Now()
	c.l.mu.Unlock()
}

type connKey struct{}

// withConn is http.Server.ConnContext: it lets handlers find their
// connection.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// busy marks the request's connection as running a call until the returned
// function is called; ok is false when the connection is already closed.
func busy(ctx context.Context) (done func(), ok bool) {
	tc, tracked := ctx.Value(connKey{}).(*trackedConn)
	if !tracked {
		return func() {}, true
	}
	if !tc.begin() {
		return nil, false
	}
	return tc.end, true
}
