package userfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readWithin runs Read in a goroutine and fails the test when it has not
// returned in 10 s (a FIFO opened for reading blocks until a writer comes).
func readWithin(t *testing.T, path string, max int64) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := Read(path, max)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s did not return in 10 s", path)
		return nil, nil
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A regular file whose size (0) says less than it holds.
	proc := filepath.Join(dir, "proc")
	if err := os.Symlink("/proc/self/maps", proc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       string // the contents; "" for an error
		err        string // in the error
	}{
		{"a regular file", regular, "A=1\n", ""},
		{"a link to a regular file", link, "A=1\n", ""},
		{"a FIFO", fifo, "", "read " + fifo + ": a FIFO (named pipe), not a regular file: give a regular file"},
		{"a link to /dev/zero", zero, "", "read " + zero + ": a character device, not a regular file"},
		{"a directory", dir, "", "a directory, not a regular file"},
		{"over the bound", big, "", "read " + big + ": 10 bytes, over the 9 docker rdma reads of such a file"},
		{"longer than its size says", proc, "", "read " + proc + ": more than the 9 bytes docker rdma reads of such a file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readWithin(t, tc.path, 9)
			if tc.err == "" {
				if err != nil || string(b) != tc.want {
					t.Fatalf("got %q, %v; want %q", b, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %d bytes, error %v; want an error saying %q", len(b), err, tc.err)
			}
			if strings.Contains(tc.err, "not a regular file") && !errors.Is(err, ErrNotRegular) {
				t.Errorf("errors.Is(%v, ErrNotRegular) is false", err)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "missing"), 9); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}
