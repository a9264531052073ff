// Command tcprr measures TCP request/response latency between two network
// namespaces: one end echoes, the other sends a small message, waits for it
// to come back, and repeats. test/bench/bench.sh runs both ends inside two
// containers' namespaces with nsenter, so traffic stays between them.
//
//	tcprr -listen ADDR:PORT                    echo for one connection, then exit
//	tcprr -connect ADDR:PORT [-n 5000] [-size 64] [-warmup 200]
//
// The client prints one JSON line: {"n","size","p50_us","p90_us","p99_us","mean_us","min_us"}.
// Both ends give up after -timeout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/test/bench"
)

func main() {
	listen := flag.String("listen", "", "echo server address")
	connect := flag.String("connect", "", "server to measure against")
	n := flag.Int("n", 5000, "measured round trips")
	size := flag.Int("size", 64, "message size in bytes")
	warmup := flag.Int("warmup", 200, "unmeasured round trips first")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	var err error
	switch {
	case *listen != "" && *connect == "":
		err = serve(*listen, *timeout)
	case *connect != "" && *listen == "":
		err = measure(*connect, *n, *size, *warmup, *timeout)
	default:
		err = errors.New("give exactly one of -listen and -connect")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcprr:", err)
		os.Exit(1)
	}
}

func serve(addr string, timeout time.Duration) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer l.Close()
	if tl, ok := l.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(timeout))
	}
	c, err := l.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.Copy(c, c); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func measure(addr string, n, size, warmup int, timeout time.Duration) error {
	var c net.Conn
	var err error
	// The server may still be starting: retry the connection briefly.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	msg := make([]byte, size)
	buf := make([]byte, size)
	us := make([]float64, 0, n)
	for i := 0; i < warmup+n; i++ {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if i >= warmup {
			us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	s := bench.Summarize(us)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"n": n, "size": size, "p50_us": s.Median, "p90_us": s.P90, "p99_us": s.P99, "mean_us": s.Mean, "min_us": s.Min,
	})
}
