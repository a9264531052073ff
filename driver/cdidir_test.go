package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/cdi"
	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// callBound is how long a call may take before a test calls it hung: far
// more than any of them needs, so that a loaded machine never trips it.
const callBound = 20 * time.Second

// goCall starts f; the function it returns waits for f and fails the test
// when f has not returned within callBound of its start. It returns how
// many bytes the process allocated while f ran.
func goCall(f func()) (wait func(t *testing.T, what string) (allocated uint64)) {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	started := time.Now()
	done := make(chan uint64, 1)
	go func() {
		f()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		done <- after.TotalAlloc - before.TotalAlloc
	}()
	return func(t *testing.T, what string) uint64 {
		t.Helper()
		select {
		case n := <-done:
			return n
		case <-time.After(time.Until(started.Add(callBound))):
			t.Fatalf("%s did not return within %s", what, callBound)
			return 0
		}
	}
}

// boundedCall runs f (see goCall).
func boundedCall(t *testing.T, what string, f func()) (allocated uint64) {
	t.Helper()
	return goCall(f)(t, what)
}

// maxReadAlloc is what a call may allocate in these tests: reading a
// refused file instead would cost its size (1.5 GB, or without end for
// /dev/zero).
const maxReadAlloc = 64 << 20

// unblockFIFO lets a reader stuck on the FIFO at path go on (it reads end
// of file), so that a test that failed by hanging there can end.
func unblockFIFO(path string) {
	if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Close(fd)
	}
}

// fileSig is what a test checks to tell that a planted file was left as it
// was: its type, its size and, for a link, its target.
func fileSig(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		return "missing: " + err.Error()
	}
	target, _ := os.Readlink(path)
	return fmt.Sprintf("%v %q %d bytes", fi.Mode().Type(), target, fi.Size())
}

// warned returns the warnings and errors logged since the hook was reset,
// with their error field.
func warned(hook *test.Hook) string {
	var out []string
	for _, e := range hook.AllEntries() {
		if e.Level > logrus.WarnLevel {
			continue
		}
		s := e.Message
		if err, ok := e.Data[logrus.ErrorKey].(error); ok {
			s += ": " + err.Error()
		}
		out = append(out, s)
	}
	hook.Reset()
	return strings.Join(out, "\n")
}

// TestCDIDirHostileFiles plants at the path of a network's CDI spec what is
// not a spec rdma-macvlan wrote. The CDI directory is shared with other
// producers, so the daemon must read it as it reads its state directory:
// start-up, CreateNetwork, /v1/status (Status) and DeleteNetwork return,
// none of them reads the file (a FIFO would block, /dev/zero and a huge
// file would cost their size in memory), CreateNetwork refuses with an
// error that names the file and the fix, the others warn, and the file is
// left exactly as it was: never deleted, replaced or written through.
func TestCDIDirHostileFiles(t *testing.T) {
	const outsideText = "not the daemon's\n"
	cases := []struct {
		name  string
		plant func(t *testing.T, path, outside string)
		want  string // in CreateNetwork's refusal
	}{
		{"FIFO", func(t *testing.T, path, _ string) {
			mustT(t, syscall.Mkfifo(path, 0o644))
			t.Cleanup(func() { unblockFIFO(path) })
		}, "is a FIFO"},
		{"symlink to /dev/zero", func(t *testing.T, path, _ string) {
			mustT(t, os.Symlink("/dev/zero", path))
		}, `is a symbolic link (to "/dev/zero")`},
		{"symlink to a file outside", func(t *testing.T, path, outside string) {
			mustT(t, os.WriteFile(outside, []byte(outsideText), 0o644))
			mustT(t, os.Symlink(outside, path))
		}, "is a symbolic link"},
		{"symlink to a spec outside", func(t *testing.T, path, outside string) {
			// A spec as the plugin writes it, unmarked: still not a
			// file the plugin wrote at this path.
			written, err := cdi.WriteSpec(filepath.Dir(outside), cdi.Device{HCA: "mlx5_0", Port: 1,
				Nodes: []rdma.DeviceNode{{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192}}})
			mustT(t, err)
			mustT(t, os.Rename(written, outside))
			mustT(t, os.Symlink(outside, path))
		}, "is a symbolic link"},
		{"dangling symlink", func(t *testing.T, path, outside string) {
			mustT(t, os.Symlink(outside, path))
		}, "is a symbolic link"},
		{"directory", func(t *testing.T, path, _ string) {
			mustT(t, os.Mkdir(path, 0o755))
			mustT(t, os.WriteFile(filepath.Join(path, "kept"), []byte(outsideText), 0o644))
		}, "is a directory"},
		{"file of 1.5 GB (sparse)", func(t *testing.T, path, _ string) {
			f, err := os.Create(path)
			mustT(t, err)
			mustT(t, f.Truncate(1536<<20))
			mustT(t, f.Close())
		}, "is 1610612736 bytes long, more than the 65536"},
		{"spec of another kind", func(t *testing.T, path, _ string) {
			mustT(t, os.WriteFile(path, []byte(`{"cdiVersion":"0.6.0","kind":"example.com/nic","devices":[{"name":"mlx5_0","containerEdits":{}}]}`+"\n"), 0o644))
		}, `kind "example.com/nic"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stateDir, cdiDir := t.TempDir(), t.TempDir()
			outside := filepath.Join(t.TempDir(), "outside")
			path := cdi.SpecPath(cdiDir, "mlx5_0")
			c.plant(t, path, outside)
			sig := fileSig(t, path)
			outsideBefore, _ := os.ReadFile(outside)
			intact := func(step string) {
				t.Helper()
				if got := fileSig(t, path); got != sig {
					t.Fatalf("%s: %s changed: %s, was %s", step, path, got, sig)
				}
				if data, _ := os.ReadFile(outside); string(data) != string(outsideBefore) {
					t.Fatalf("%s: the file outside the CDI directory was written: %q", step, data)
				}
				if c.name == "directory" {
					if data, err := os.ReadFile(filepath.Join(path, "kept")); err != nil || string(data) != outsideText {
						t.Fatalf("%s: the directory's content changed (%v)", step, err)
					}
				}
			}
			log, hook := test.NewNullLogger()
			links := drivertest.NewLinks("p0")
			root := hosts(t, "p0")
			cfg := Config{StateDir: stateDir, Links: links, Log: log, Sysfs: rdma.NewSysfs(root), CDIDir: cdiDir,
				GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond}
			start := func(step string) *Driver {
				t.Helper()
				var (
					d   *Driver
					err error
				)
				if n := boundedCall(t, step, func() { d, err = New(cfg) }); n > maxReadAlloc {
					t.Errorf("%s allocated %d bytes: the file was read", step, n)
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				t.Cleanup(d.Close)
				return d
			}

			// At start, with no network: the file is not one of ours to
			// remove.
			d := start("start-up with the file in the CDI directory")
			intact("start-up")
			if w := warned(hook); !strings.Contains(w, path) || !strings.Contains(w, "move it away") {
				t.Errorf("start-up did not warn about %s and the fix; logged:\n%s", path, w)
			}

			// CreateNetwork is refused, and /v1/status answers meanwhile.
			var createErr error
			create := goCall(func() { createErr = d.CreateNetwork(netReq("n1", "parent", "p0")) })
			boundedCall(t, "Status during CreateNetwork", func() { d.Status() })
			if n := create(t, "CreateNetwork"); n > maxReadAlloc {
				t.Errorf("CreateNetwork allocated %d bytes: the file was read", n)
			}
			var conflict *ConflictError
			if msg := errString(createErr); !errors.As(createErr, &conflict) || !strings.Contains(msg, path) ||
				!strings.Contains(msg, c.want) || !strings.Contains(msg, "move it away") {
				t.Errorf("CreateNetwork = %v; want a conflict that names %s, says %q and the fix", createErr, path, c.want)
			}
			t.Logf("refused: %v", createErr)
			if n := len(d.Status().Networks); n != 0 {
				t.Errorf("%d networks recorded despite the refusal", n)
			}
			intact("CreateNetwork")

			// A network whose spec is replaced by the file: a restart
			// and DeleteNetwork leave it.
			aside := filepath.Join(t.TempDir(), "aside")
			mustT(t, os.Rename(path, aside))
			mustT(t, d.CreateNetwork(netReq("n1", "parent", "p0")))
			d.Close()
			mustT(t, os.Remove(path))
			mustT(t, os.Rename(aside, path))
			hook.Reset()
			d = start("start-up with the network's spec replaced")
			intact("restart")
			if w := warned(hook); !strings.Contains(w, path) || !strings.Contains(w, "move it away") {
				t.Errorf("restart did not report %s and the fix; logged:\n%s", path, w)
			}
			var delErr error
			if n := boundedCall(t, "DeleteNetwork", func() { delErr = d.DeleteNetwork("n1") }); n > maxReadAlloc {
				t.Errorf("DeleteNetwork allocated %d bytes: the file was read", n)
			}
			if delErr != nil {
				t.Errorf("DeleteNetwork: %v", delErr)
			}
			if n := len(d.Status().Networks); n != 0 {
				t.Errorf("DeleteNetwork left %d networks", n)
			}
			intact("DeleteNetwork")
			if w := warned(hook); !strings.Contains(w, path) {
				t.Errorf("DeleteNetwork did not warn that %s was left; logged:\n%s", path, w)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestCDIFileIOHoldsNoLock stalls each file operation CreateNetwork and
// DeleteNetwork make in the CDI directory, as a hung file system would:
// meanwhile /v1/status (Status) and the life cycle of a container on
// another network are answered. The CDI directory is not the daemon's, so
// the driver's lock must never be held across its I/O.
func TestCDIFileIOHoldsNoLock(t *testing.T) {
	for _, c := range []struct{ call, op string }{
		{"CreateNetwork", "read"}, {"CreateNetwork", "write"},
		{"DeleteNetwork", "read"}, {"DeleteNetwork", "remove"},
	} {
		t.Run(c.call+"/"+c.op, func(t *testing.T) {
			links := drivertest.NewLinks("p0", "p1")
			d := newTestDriver(t, links, t.TempDir())
			mustT(t, d.CreateNetwork(netReq("other", "parent", "p1")))
			if c.call == "DeleteNetwork" {
				mustT(t, d.CreateNetwork(netReq("n1", "parent", "p0")))
			}
			stalled, release := make(chan struct{}), make(chan struct{})
			letGo := sync.OnceFunc(func() { close(release) })
			t.Cleanup(letGo) // a failed test lets the stalled call end
			var first sync.Once
			d.cdiIO = func(op, path string) {
				if op == c.op && path == cdi.SpecPath(d.cdiDir, "mlx5_0") {
					first.Do(func() {
						close(stalled)
						<-release
					})
				}
			}
			var callErr error
			call := goCall(func() {
				if c.call == "CreateNetwork" {
					callErr = d.CreateNetwork(netReq("n1", "parent", "p0"))
				} else {
					callErr = d.DeleteNetwork("n1")
				}
			})
			select {
			case <-stalled:
			case <-time.After(callBound):
				t.Fatalf("%s never reached the CDI %s", c.call, c.op)
			}
			var lifeErr error
			boundedCall(t, "Status and a container's life cycle on another network while "+c.call+" waits for the CDI directory", func() {
				_ = d.Status()
				if _, lifeErr = d.CreateEndpoint(ep("other", "e1", "10.5.0.2/24")); lifeErr != nil {
					return
				}
				if _, lifeErr = d.Join("other", "e1", "/sb/e1"); lifeErr != nil {
					return
				}
				if lifeErr = d.Leave("other", "e1"); lifeErr != nil {
					return
				}
				lifeErr = d.DeleteEndpoint("other", "e1")
			})
			letGo()
			call(t, c.call)
			mustT(t, lifeErr)
			mustT(t, callErr)
			_, err := os.Stat(cdi.SpecPath(d.cdiDir, "mlx5_0"))
			if exists := err == nil; exists != (c.call == "CreateNetwork") {
				t.Errorf("after %s the spec exists: %v", c.call, exists)
			}
		})
	}
}

// TestCDISpecFollowsRacingNetworks races, on one HCA port, the deletion of
// its last network with the creation of the next, with every CDI file
// operation slowed so that the calls interleave: the port's spec must exist
// exactly while a network uses it. Specs are per port and shared by its
// networks, so a DeleteNetwork that decides "unused" before a racing
// CreateNetwork records its network would remove the new network's spec.
func TestCDISpecFollowsRacingNetworks(t *testing.T) {
	links := drivertest.NewLinks("p0")
	d := newTestDriver(t, links, t.TempDir())
	d.cdiIO = func(string, string) { time.Sleep(time.Millisecond) }
	spec := cdi.SpecPath(d.cdiDir, "mlx5_0")
	mustT(t, d.CreateNetwork(netReq("n0", "parent", "p0")))
	// A round that interleaves them wrongly loses the spec about one time
	// in twenty: 200 rounds all but never miss it.
	const rounds = 200
	for i := 1; i <= rounds; i++ {
		prev, next := fmt.Sprintf("n%d", i-1), fmt.Sprintf("n%d", i)
		var delErr, createErr error
		del := goCall(func() { delErr = d.DeleteNetwork(prev) })
		create := goCall(func() { createErr = d.CreateNetwork(netReq(next, "parent", "p0")) })
		del(t, "DeleteNetwork "+prev)
		create(t, "CreateNetwork "+next)
		mustT(t, delErr)
		mustT(t, createErr)
		if _, err := os.Stat(spec); err != nil {
			t.Fatalf("round %d: network %s uses mlx5_0 but its spec is gone: %v", i, next, err)
		}
	}
	mustT(t, d.DeleteNetwork(fmt.Sprintf("n%d", rounds)))
	if _, err := os.Stat(spec); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no network uses mlx5_0 but its spec is still there: %v", err)
	}
}
