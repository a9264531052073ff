package plugin_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/plugin"
	"github.com/rdma-macvlan/rdma-macvlan/plugin/plugintest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
	"golang.org/x/sys/unix"
)

// socketServer serves a driver on fake links (parents p0, p1) and a fake
// mlx5 sysfs over a unix socket in a temporary directory; configure
// changes the server before it serves.
func socketServer(t *testing.T, configure func(*plugin.Server)) (*plugin.Server, string) {
	t.Helper()
	sysfs := t.TempDir()
	for i, nd := range []string{"p0", "p1"} {
		if err := rdmatest.BuildMLX5(sysfs, rdmatest.MLX5Options{HCA: fmt.Sprintf("mlx5_%d", i), Netdev: nd, Uverbs: i,
			PCIAddr: fmt.Sprintf("0000:%02x:00.0", 3+i), MAC: fmt.Sprintf("a0:88:c2:5b:03:%02x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := driver.New(driver.Config{StateDir: t.TempDir(), Links: newFuzzLinks(), Log: quietLogger(), Sysfs: rdma.NewSysfs(sysfs),
		CDIDir: t.TempDir(), GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := plugin.Listen(sock)
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	srv := plugin.NewServer(quietLogger())
	if configure != nil {
		configure(srv)
	}
	srv.SetDriver(d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		d.Close()
	})
	return srv, sock
}

// dialRetry connects to sock, waiting while its accept queue is full.
func dialRetry(sock string, deadline time.Time) (net.Conn, error) {
	for {
		c, err := net.Dial("unix", sock)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(time.Millisecond)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestConnectionFlood opens 20,000 connections to the daemon's socket, one
// in ten sending a request whose body never comes, the others nothing, and
// holds them all open. The daemon must keep at most its cap of them (so its
// file descriptors and memory stay bounded), and GET /v1/status and a
// driver call must still be answered at once: Docker's calls come through
// the same socket.
func TestConnectionFlood(t *testing.T) {
	const want = 20000
	srv, sock := socketServer(t, nil)
	capConns := srv.MaxConns()

	// The flood's client ends live in this process too: make room for
	// them, the daemon's capped share and the test's own files, within
	// the hard limit (raised if this process may).
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	orig := rl
	need := uint64(want + capConns + 512)
	if rl.Max < need {
		rl.Max = need // works for root (CAP_SYS_RESOURCE)
	}
	if rl.Cur < need {
		rl.Cur = min(need, rl.Max)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		rl = orig
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &orig) })
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	n := want
	if int(rl.Cur) < want+capConns+512 {
		n = int(rl.Cur) - capConns - 512
		t.Logf("RLIMIT_NOFILE is %d here and cannot be raised: flooding with %d connections instead of %d", rl.Cur, n, want)
	}
	if n < 4*capConns {
		t.Fatalf("RLIMIT_NOFILE %d leaves room for %d connections, too few to flood a cap of %d: raise the limit (ulimit -n)", rl.Cur, n, capConns)
	}

	base := openFDs(t)
	deadline := time.Now().Add(60 * time.Second)
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	start := time.Now()
	for i := 0; i < n; i++ {
		c, err := dialRetry(sock, deadline)
		if err != nil {
			t.Fatalf("connection %d: %v (the daemon holds about %d connections; its cap is %d)", i, err, openFDs(t)-base-i, capConns)
		}
		conns = append(conns, c)
		if i%10 == 0 {
			// Headers, then one byte of a body of 1000: a slow-body client.
			// The daemon may have closed it already; that is fine.
			_, _ = io.WriteString(c, "POST /NetworkDriver.CreateNetwork HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		}
	}
	t.Logf("%d connections open in %s (daemon holds %d, cap %d)", n, time.Since(start).Round(time.Millisecond), srv.OpenConns(), capConns)

	c := plugintest.NewClient(sock)
	// The flood can leave the listen backlog full for a moment after its
	// last dial, while the daemon closes what is over its cap: a dial then
	// gets EAGAIN. Docker's plugin client retries a failed dial; so does
	// this one, for up to 5 s (the time taken is logged below).
	c.HTTP.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialRetry(sock, time.Now().Add(5*time.Second))
	}}
	t0 := time.Now()
	if _, err := c.Status(); err != nil {
		t.Fatalf("status under %d idle and slow-body connections: %v", n, err)
	}
	t1 := time.Now()
	nid := strings.Repeat("f1", 32)
	if err := c.Call("CreateNetwork", map[string]any{"NetworkID": nid, "Options": map[string]any{"com.docker.network.generic": map[string]string{"parent": "p0"}},
		"IPv4Data": []map[string]string{{"AddressSpace": "LocalDefault", "Pool": "10.30.0.0/24", "Gateway": "10.30.0.1/24"}}}, nil); err != nil {
		t.Fatalf("CreateNetwork under %d idle and slow-body connections: %v", n, err)
	}
	if err := c.Call("DeleteNetwork", map[string]string{"NetworkID": nid}, nil); err != nil {
		t.Fatalf("DeleteNetwork under %d idle and slow-body connections: %v", n, err)
	}
	t.Logf("under the flood: status answered in %s, CreateNetwork and DeleteNetwork in %s", t1.Sub(t0).Round(time.Microsecond), time.Since(t1).Round(time.Microsecond))
	if got := srv.OpenConns(); got > capConns {
		t.Errorf("daemon holds %d connections, more than its cap %d", got, capConns)
	}
	// Our n client ends, the daemon's capped share, and a few more
	// (the client's own connection, listener, timers).
	if fds := openFDs(t); fds > base+n+capConns+64 {
		t.Errorf("%d file descriptors open for %d client connections: the daemon holds %d, more than its cap %d", fds, n, fds-base-n, capConns)
	}
}

// TestConnectionTimeouts checks that each way of holding a connection
// without finishing is cut: a client that sends part of its headers, part
// of its body, nothing after an answer (kept alive), or that does not read
// its answers.
func TestConnectionTimeouts(t *testing.T) {
	const limit = 300 * time.Millisecond
	_, sock := socketServer(t, func(s *plugin.Server) { s.SetLimits(plugin.DefaultMaxConns, limit, 2*limit, limit, limit) })
	// closedWithin reads (and discards) until the daemon closes c.
	closedWithin := func(t *testing.T, c net.Conn, within time.Duration) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %s", within)
		}
	}
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("slow headers", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "POST /NetworkDriver.CreateNetwork HTTP/1.1\r\nHost: x\r\n")
		closedWithin(t, c, limit+3*time.Second)
	})
	t.Run("slow body", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "POST /NetworkDriver.CreateNetwork HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
		closedWithin(t, c, 2*limit+3*time.Second)
	})
	t.Run("idle after an answer", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "POST /NetworkDriver.GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			t.Fatal("the daemon closed a kept-alive connection right after its answer")
		}
		closedWithin(t, c, limit+3*time.Second)
	})
	t.Run("answers not read", func(t *testing.T) {
		// Pipelined requests whose answers fill the socket's buffers: the
		// daemon blocks writing, and must give up after writeTimeout.
		c := dial(t)
		const sent = 20000
		req := "POST /NetworkDriver.GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
		go func() {
			w := bufio.NewWriter(c)
			for i := 0; i < sent; i++ {
				if _, err := w.WriteString(req); err != nil {
					return
				}
			}
			_ = w.Flush()
		}()
		time.Sleep(limit + 2*time.Second)
		r := bufio.NewReader(c)
		got := 0
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for ; got < sent; got++ {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if got == sent {
			t.Fatalf("all %d answers were delivered to a client that did not read for %s: the daemon waited on it", sent, limit+2*time.Second)
		}
		t.Logf("the daemon gave up after %d of %d answers", got, sent)
	})
}

// routes are every path the daemon serves, with the method it takes.
var routes = func() [][2]string {
	r := [][2]string{{http.MethodPost, "/Plugin.Activate"}, {http.MethodPost, "/NetworkDriver.GetCapabilities"}, {http.MethodGet, plugin.StatusPath}}
	for _, op := range decodedCalls {
		r = append(r, [2]string{http.MethodPost, "/NetworkDriver." + op})
	}
	return r
}()

// TestUnreadBodyCut: on every route, a request whose Content-Length
// announces a body that never comes, or comes a byte at a time, ends
// within the request's time limit: answered or not, the connection is
// closed. (Handlers that have no use for the body must still not leave the
// HTTP server waiting for it without a deadline.) Every request is sent at
// once; each route's outcome is its own subtest.
func TestUnreadBodyCut(t *testing.T) {
	const limit = 300 * time.Millisecond
	_, sock := socketServer(t, func(s *plugin.Server) { s.SetLimits(plugin.DefaultMaxConns, limit, 2*limit, limit, limit) })
	within := 2*limit + 3*time.Second
	type outcome struct {
		name   string
		err    error // of the client's own doing
		open   bool  // still open after within
		took   time.Duration
		answer []byte
	}
	var cases []*outcome
	var wg sync.WaitGroup
	for _, rt := range routes {
		for _, trickle := range []bool{false, true} {
			o := &outcome{name: rt[0] + " " + rt[1] + ", body never sent"}
			if trickle {
				o.name = rt[0] + " " + rt[1] + ", body sent a byte at a time"
			}
			cases = append(cases, o)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("unix", sock)
				if err != nil {
					o.err = err
					return
				}
				defer c.Close()
				start := time.Now()
				if _, err := io.WriteString(c, rt[0]+" "+rt[1]+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
					o.err = err
					return
				}
				stop := make(chan struct{})
				defer close(stop)
				if trickle {
					go func() {
						for i := 0; i < 1000; i++ {
							select {
							case <-stop:
								return
							case <-time.After(20 * time.Millisecond):
							}
							if _, err := io.WriteString(c, " "); err != nil {
								return
							}
						}
					}()
				}
				_ = c.SetReadDeadline(start.Add(within))
				o.answer, err = io.ReadAll(c)
				o.took = time.Since(start)
				var ne net.Error
				o.open = errors.As(err, &ne) && ne.Timeout()
			}()
		}
	}
	wg.Wait()
	for _, o := range cases {
		t.Run(o.name, func(t *testing.T) {
			if o.err != nil {
				t.Fatal(o.err)
			}
			if o.open {
				t.Fatalf("connection neither closed nor done within %s (answer so far: %.200q)", within, o.answer)
			}
			if len(o.answer) > 0 && (!bytes.Contains(o.answer, []byte("request did not arrive in full within 600ms (")) || !bytes.Contains(o.answer, []byte(" of 1000 body bytes)"))) {
				t.Errorf("answer %.300q does not say the request did not arrive in time", o.answer)
			}
			t.Logf("closed after %s, answer %.300q", o.took.Round(time.Millisecond), o.answer)
		})
	}
}
