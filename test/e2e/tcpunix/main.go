// Command tcpunix forwards TCP connections on a loopback port to a unix
// socket, so that test/e2e/e2e-cli.sh can point DOCKER_HOST at a private
// engine through tcp:// (docker rdma must then ask Docker through the
// docker CLI, not the engine's socket).
//
//	tcpunix -socket /path/docker.sock
//
// listens on 127.0.0.1 on a free port, prints "tcp://127.0.0.1:PORT" and
// serves until it is killed. It only ever listens on the loopback address.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	sock := flag.String("socket", "", "the unix socket to forward to")
	flag.Parse()
	if *sock == "" {
		fmt.Fprintln(os.Stderr, "tcpunix: -socket PATH is required")
		os.Exit(2)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "tcpunix: listen on 127.0.0.1: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("tcp://%s\n", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "tcpunix: %v\n", err)
			os.Exit(1)
		}
		go forward(c, *sock)
	}
}

// forward copies between c and a new connection to the unix socket until
// either side closes.
func forward(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tcpunix: dial %s: %v\n", sock, err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}
