package driver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver/drivertest"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// newDriverWithin runs New on dir and fails the test when it does not
// return within 10 s (a FIFO opened for reading blocks until a writer
// comes).
func newDriverWithin(t *testing.T, dir string, log *logrus.Logger) (*Driver, error) {
	t.Helper()
	type result struct {
		d   *Driver
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := New(Config{StateDir: dir, Links: drivertest.NewLinks("p0"), Log: log, Sysfs: rdma.NewSysfs(hosts(t, "p0")),
			CDIDir: t.TempDir(), GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond})
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		if r.d != nil {
			t.Cleanup(r.d.Close)
		}
		return r.d, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("start-up on %s did not return within 10 s", dir)
		return nil, nil
	}
}

// TestStateDirHostileFiles plants in the state directory what is not a
// file the daemon wrote: start-up must neither write through a symlink,
// create a link's target, block on a FIFO, nor read a device or a huge
// file, and must say which file is wrong and what to do.
func TestStateDirHostileFiles(t *testing.T) {
	var outside string // a file outside the state directory, new for each case
	const outsideText = "not the daemon's\n"
	cases := []struct {
		name  string
		plant func(t *testing.T, dir string)
		want  string // in New's error; "" when start-up succeeds
		check func(t *testing.T, dir string)
	}{
		{"instance a symlink to a file outside", func(t *testing.T, dir string) {
			mustT(t, os.WriteFile(outside, []byte(outsideText), 0o600))
			mustT(t, os.Symlink(outside, filepath.Join(dir, "instance")))
		}, "instance is a symbolic link", nil},
		{"instance a symlink to another instance's ID", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "instance")
			mustT(t, os.WriteFile(other, []byte("0123456789abcdef\n"), 0o600))
			mustT(t, os.Symlink(other, filepath.Join(dir, "instance")))
		}, "instance is a symbolic link", nil},
		{"lock a dangling symlink", func(t *testing.T, dir string) {
			mustT(t, os.Symlink(outside+"-lock", filepath.Join(dir, "lock")))
		}, "lock is a symbolic link", func(t *testing.T, _ string) {
			if _, err := os.Lstat(outside + "-lock"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the lock symlink's target was created: %v", err)
			}
		}},
		{"instance a FIFO", func(t *testing.T, dir string) {
			mustT(t, syscall.Mkfifo(filepath.Join(dir, "instance"), 0o600))
		}, "instance is a FIFO", nil},
		{"lock a FIFO", func(t *testing.T, dir string) {
			mustT(t, syscall.Mkfifo(filepath.Join(dir, "lock"), 0o600))
		}, "lock is a FIFO", nil},
		{"instance a symlink to /dev/zero", func(t *testing.T, dir string) {
			mustT(t, os.Symlink("/dev/zero", filepath.Join(dir, "instance")))
		}, "instance is a symbolic link", nil},
		{"instance a directory", func(t *testing.T, dir string) {
			mustT(t, os.Mkdir(filepath.Join(dir, "instance"), 0o700))
		}, "instance is a directory", nil},
		{"networks a symlink to a directory outside", func(t *testing.T, dir string) {
			mustT(t, os.Symlink(t.TempDir(), filepath.Join(dir, networksDir)))
		}, "networks is a symbolic link, not a directory", nil},
		{"instance of 1.5 GB (sparse)", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "instance"))
			mustT(t, err)
			mustT(t, f.Truncate(1536<<20))
			mustT(t, f.Close())
		}, "", func(t *testing.T, dir string) {
			// Too long to be the daemon's: replaced like garbage, atomically.
			data, err := os.ReadFile(filepath.Join(dir, "instance"))
			mustT(t, err)
			if !idRE.MatchString(strings.TrimSpace(string(data))) {
				t.Errorf("instance holds %d bytes, not a new ID", len(data))
			}
		}},
		{"record of 1.5 GB (sparse)", func(t *testing.T, dir string) {
			mustT(t, os.MkdirAll(filepath.Join(dir, networksDir), 0o700))
			f, err := os.Create(filepath.Join(dir, networksDir, "n1.json"))
			mustT(t, err)
			mustT(t, f.Truncate(1536<<20))
			mustT(t, f.Close())
		}, "", func(t *testing.T, dir string) {
			if _, err := os.Stat(filepath.Join(dir, networksDir, "n1.json"+corruptExt)); err != nil {
				t.Errorf("the huge record was not set aside: %v", err)
			}
		}},
		{"record a FIFO", func(t *testing.T, dir string) {
			mustT(t, os.MkdirAll(filepath.Join(dir, endpointsDir), 0o700))
			mustT(t, syscall.Mkfifo(filepath.Join(dir, endpointsDir, "e1.json"), 0o600))
		}, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			mustT(t, os.Mkdir(dir, 0o700))
			outside = filepath.Join(t.TempDir(), "outside")
			c.plant(t, dir)
			_, err := newDriverWithin(t, dir, quietLog())
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("start-up failed: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("start-up succeeded, want an error saying %q", c.want)
			case c.want != "":
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "move it away") {
					t.Errorf("error %q does not say %q and what to do", err, c.want)
				}
			}
			if data, err := os.ReadFile(outside); err == nil && string(data) != outsideText {
				t.Errorf("the file outside was overwritten: %q", data)
			}
			if c.check != nil {
				c.check(t, dir)
			}
		})
	}
}

// TestInstanceIDWrittenAtomically: a new instance ID replaces the file by
// rename (never an in-place write), so a crash leaves the old one or the
// new one.
func TestInstanceIDWrittenAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	mustT(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "instance")
	const garbage = "not an ID!\n"
	mustT(t, os.WriteFile(path, []byte(garbage), 0o600))
	// A hard link sees an in-place write but not a rename over the name.
	mustT(t, os.Link(path, path+".seen"))
	if _, err := newDriverWithin(t, dir, quietLog()); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path + ".seen"); string(data) != garbage {
		t.Errorf("the instance file was rewritten in place (%q), not replaced", data)
	}
	if data, _ := os.ReadFile(path); !idRE.MatchString(strings.TrimSpace(string(data))) {
		t.Errorf("instance holds %q, not an ID", data)
	}
}

// TestStateDirExposureWarned: a state directory others can write, or files
// in it of another owner, are logged at start.
func TestStateDirExposureWarned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	mustT(t, os.Mkdir(dir, 0o700))
	mustT(t, os.Chmod(dir, 0o777))
	log, hook := test.NewNullLogger()
	other := 0
	if os.Geteuid() == 0 {
		mustT(t, os.MkdirAll(filepath.Join(dir, networksDir), 0o700))
		f := filepath.Join(dir, networksDir, "foreign.txt")
		mustT(t, os.WriteFile(f, nil, 0o600))
		mustT(t, os.Chown(f, 65534, 65534))
		other = 1
	}
	if _, err := newDriverWithin(t, dir, log); err != nil {
		t.Fatal(err)
	}
	var warns []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warns = append(warns, e.Message)
		}
	}
	all := strings.Join(warns, "\n")
	if !strings.Contains(all, "directory "+dir+" is writable by every user (mode 0777): chmod go-w "+dir) {
		t.Errorf("no warning about the world-writable state directory; warnings:\n%s", all)
	}
	if other == 1 && !strings.Contains(all, "1 files in the state directory belong to another user") {
		t.Errorf("no warning about a file of uid 65534; warnings:\n%s", all)
	}
	if other == 0 {
		t.Log("not root: the file-of-another-owner case needs chown and was not checked")
	}
}

// TestNotDurableChangeIsDone: when the directory fsync fails after a
// change is in place (the disk reports EIO), the change is done: the call
// succeeds, memory and disk agree, the failure is logged as not durable,
// and a retry is answered as done.
func TestNotDurableChangeIsDone(t *testing.T) {
	links := drivertest.NewLinks("p0")
	dir := t.TempDir()
	log, hook := test.NewNullLogger()
	d, err := New(Config{StateDir: dir, Links: links, Log: log, Sysfs: rdma.NewSysfs(hosts(t, "p0")), CDIDir: t.TempDir(),
		GIDTimeout: time.Second, GIDPoll: 5 * time.Millisecond})
	mustT(t, err)
	t.Cleanup(d.Close)
	eio := &os.PathError{Op: "fsync", Path: dir, Err: syscall.EIO}

	restore := atomicfile.FailDirSync(eio)
	defer restore()
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Fatalf("CreateNetwork with a failing directory fsync: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, networksDir, "n1.json")); err != nil {
		t.Fatalf("network record: %v", err)
	}
	if _, err := d.CreateEndpoint(CreateEndpointRequest{NetworkID: "n1", EndpointID: "e1", IPv4: "10.5.0.2/24"}); err != nil {
		t.Fatalf("CreateEndpoint with a failing directory fsync: %v", err)
	}
	if err := d.DeleteEndpoint("n1", "e1"); err != nil {
		t.Fatalf("DeleteEndpoint with a failing directory fsync: %v", err)
	}
	if _, err := links.LinkByName(LinkName("e1")); err == nil {
		t.Error("the endpoint's link is still there")
	}
	if _, err := os.Stat(filepath.Join(dir, endpointsDir, "e1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the endpoint's record is still there: %v", err)
	}
	// Retries are answered as done.
	if err := d.DeleteEndpoint("n1", "e1"); err != nil {
		t.Errorf("DeleteEndpoint retry: %v", err)
	}
	if err := d.CreateNetwork(netReq("n1", "parent", "p0")); err != nil {
		t.Errorf("CreateNetwork retry: %v", err)
	}
	var logged bytes.Buffer
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.ErrorLevel && strings.Contains(e.Message, "not durable") {
			logged.WriteString(e.Message + ": " + e.Data[logrus.ErrorKey].(error).Error() + "\n")
		}
	}
	if !strings.Contains(logged.String(), "input/output error") {
		t.Errorf("the failed fsync was not logged as not durable; log:\n%s", logged.String())
	}
	restore()
	if err := d.DeleteNetwork("n1"); err != nil {
		t.Fatal(err)
	}
}

func mustT(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
