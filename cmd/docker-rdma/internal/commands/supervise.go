package commands

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// superviseDocker runs docker with our standard input and output (so a
// terminal stays a terminal for docker run -it) and returns its exit status;
// a docker killed by a signal kills us with the same signal. Standard error
// passes through a watcher that recognises the runtime refusing the
// memlock limit, to explain it after docker's own message.
//
// docker runs as a child, not through exec(2), only so that its error can
// be explained. Terminal signals (SIGINT, SIGQUIT, SIGHUP) reach docker from
// the terminal itself, as it is in our process group: we ignore them rather
// than deliver them twice. SIGTERM, which is sent to one process, is passed
// on. memlock is the limit asked, for the explanation.
func superviseDocker(env *Env, path string, argv []string, memlock string) int {
	cmd := exec.Command(path, argv...)
	cmd.Stdin = env.Stdin
	cmd.Stdout = env.Stdout
	watch := &tailWriter{w: env.Stderr, max: 16 << 10}
	cmd.Stderr = watch

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		tprintf(env.Stderr, "docker rdma run: start %s: %v\n", path, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGTERM {
					_ = cmd.Process.Signal(sig)
				}
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)

	status := 0
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		ws, ok := exit.Sys().(syscall.WaitStatus)
		if ok && ws.Signaled() {
			if env.DieBy != nil {
				env.DieBy(ws.Signal())
			}
			status = 128 + int(ws.Signal())
		} else {
			status = exit.ExitCode()
		}
	default:
		tprintf(env.Stderr, "docker rdma run: %s: %v\n", path, err)
		return exitRunFailed
	}
	if status != 0 && memlockRefused(watch.Tail()) {
		tprintf(env.Stderr, memlockHint, memlock)
	}
	return status
}

const memlockHint = `docker rdma run: the container runtime could not set the locked-memory limit memlock=%s:
  the engine (dockerd, containerd and runc) runs without CAP_SYS_RESOURCE or under a lower hard limit.
  Ask for less:           docker rdma run --memlock 8M ...   (docker rdma doctor --image IMAGE shows what the engine allows)
  or raise the engine's:  LimitMEMLOCK=infinity in the docker.service and containerd.service units, then restart them.
`

// memlockRefused reports whether docker's error says the runtime could not
// set RLIMIT_MEMLOCK (runc: "error setting rlimit type 8"; crun:
// "setrlimit `RLIMIT_MEMLOCK`").
func memlockRefused(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("rlimit type 8")) || bytes.Contains(stderr, []byte("RLIMIT_MEMLOCK"))
}

// DieBy ends this process with sig, as docker ended, so that our parent
// sees the same status. It returns when the signal does not kill us.
func DieBy(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
}

// tailWriter writes through to w and keeps the last max bytes written.
type tailWriter struct {
	w   io.Writer
	max int

	mu   sync.Mutex // guards tail
	tail []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// Tail returns the last bytes written.
func (t *tailWriter) Tail() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.tail...)
}
