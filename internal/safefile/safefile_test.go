package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readWithin runs Read and fails the test when it does not return within
// 20 s (a FIFO opened for reading waits for a writer).
func readWithin(t *testing.T, path string, max int64) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := Read(path, max)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("Read(%s) did not return within 20 s", path)
		return nil, nil
	}
}

// TestReadRefusesAllButRegularFiles: what is not a regular file within
// the bound is refused, with what it is, without being read.
func TestReadRefusesAllButRegularFiles(t *testing.T) {
	cases := []struct {
		name     string
		plant    func(t *testing.T, path string)
		want     string // in the *Error's text; "" when read
		tooLarge bool
	}{
		{"regular file", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte("data"), 0o600))
		}, "", false},
		{"regular file of exactly the bound", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat("x", 64)), 0o600))
		}, "", false},
		{"FIFO", func(t *testing.T, path string) {
			must(t, syscall.Mkfifo(path, 0o600))
			t.Cleanup(func() {
				// Lets a reader stuck on it (a failed test) go on.
				if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			})
		}, "is a FIFO", false},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			must(t, os.Symlink("/dev/zero", path))
		}, `is a symbolic link (to "/dev/zero")`, false},
		{"symlink to a regular file", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "target")
			must(t, os.WriteFile(target, []byte("data"), 0o600))
			must(t, os.Symlink(target, path))
		}, "is a symbolic link", false},
		{"dangling symlink", func(t *testing.T, path string) {
			must(t, os.Symlink(filepath.Join(t.TempDir(), "none"), path))
		}, "is a symbolic link", false},
		{"directory", func(t *testing.T, path string) {
			must(t, os.Mkdir(path, 0o700))
		}, "is a directory", false},
		{"socket", func(t *testing.T, path string) {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			must(t, err)
			t.Cleanup(func() { syscall.Close(fd) })
			must(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}))
		}, "is a socket", false},
		{"one byte over the bound", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat("x", 65)), 0o600))
		}, "is 65 bytes long, more than the 64 it can be", true},
		{"1.5 GB (sparse)", func(t *testing.T, path string) {
			f, err := os.Create(path)
			must(t, err)
			must(t, f.Truncate(1536<<20))
			must(t, f.Close())
		}, "is 1610612736 bytes long, more than the 64 it can be", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			c.plant(t, path)
			data, err := readWithin(t, path, 64)
			if c.want == "" {
				if err != nil || len(data) == 0 {
					t.Fatalf("Read = %q, %v; want the content", data, err)
				}
				return
			}
			var bad *Error
			if !errors.As(err, &bad) || bad.Path != path || !strings.Contains(err.Error(), path+" "+c.want) || bad.TooLarge != c.tooLarge {
				t.Fatalf("Read = %d bytes, %v; want an *Error saying %q (too large: %v)", len(data), err, path+" "+c.want, c.tooLarge)
			}
		})
	}
}

// TestOpenMissing: a missing file is fs.ErrNotExist, and O_CREATE makes a
// regular file of the mode asked for.
func TestOpenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if _, err := Read(path, 64); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
	f, err := Open(path, os.O_CREATE|os.O_RDWR, 0o600, 0)
	must(t, err)
	must(t, f.Close())
	fi, err := os.Lstat(path)
	must(t, err)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created %v, want a regular file of mode 0600", fi.Mode())
	}
}

// TestOpenDeviceNode: a device node is refused without being opened
// (opening some devices acts on them). The node's major number belongs to
// no driver, so opening it would fail with ENXIO rather than be refused as
// a device. Making one needs root.
func TestOpenDeviceNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	path := filepath.Join(t.TempDir(), "dev")
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(4000, 0))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	_, err := Open(path, os.O_RDONLY, 0, 0)
	var bad *Error
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), path+" is a device") {
		t.Fatalf("Open of a device node: %v, want an *Error saying it is a device", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
