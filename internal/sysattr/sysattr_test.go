package sysattr

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// promptly runs f and fails the test if it has not returned within a few
// seconds (a FIFO opened without O_NONBLOCK waits for a writer forever).
func promptly(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5s", what)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadAttribute(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "state"), "4: ACTIVE\n")
	write(t, filepath.Join(dir, "page"), strings.Repeat("x", MaxSize))
	for _, tc := range []struct {
		file string
		buf  []byte
		want string
	}{
		{"state", nil, "4: ACTIVE"},
		{"state", make([]byte, 10), "4: ACTIVE"},
		{"page", nil, strings.Repeat("x", MaxSize)},
	} {
		got, err := Read(filepath.Join(dir, tc.file), tc.buf)
		if err != nil || got != tc.want {
			t.Errorf("Read(%s, %d bytes) = %.20q, %v; want %.20q", tc.file, len(tc.buf), got, err, tc.want)
		}
	}
}

// Whatever stands where an attribute should be, Read returns at once with
// an error naming the path and what it is, and reads no more than a page.
func TestReadRefusesWhatIsNoAttribute(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO with a writer that never writes: a read would wait forever.
	held := filepath.Join(dir, "held")
	if err := syscall.Mkfifo(held, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(held, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "long"), strings.Repeat("x", MaxSize+1))
	write(t, filepath.Join(dir, "gid"), "fe80:0000:0000:0000:0000:0000:0000:0001\n")
	for _, tc := range []struct {
		path string
		buf  []byte
		what string
	}{
		{fifo, nil, "is a FIFO"},
		{held, nil, "is a FIFO"},
		{filepath.Join(dir, "zero"), nil, "is a symbolic link"},
		{"/dev/zero", nil, "is a character device"},
		{dir, nil, "is a directory"},
		{filepath.Join(dir, "long"), nil, "is longer than 4096 bytes"},
		{filepath.Join(dir, "gid"), make([]byte, 16), "is longer than 16 bytes"},
	} {
		var got string
		var err error
		promptly(t, "Read("+tc.path+")", func() { got, err = Read(tc.path, tc.buf) })
		var ae *Error
		if !errors.As(err, &ae) || ae.Path != tc.path || ae.What != tc.what {
			t.Errorf("Read(%s) = %.20q, %v; want an *Error: %s", tc.path, got, err, tc.what)
			continue
		}
		if want := tc.path + " " + tc.what + ", not a sysfs attribute (a regular file of at most 4096 bytes)"; err.Error() != want {
			t.Errorf("Read(%s): %q, want %q", tc.path, err, want)
		}
	}
	if _, err := Read(filepath.Join(dir, "absent"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(absent) = %v, want ErrNotExist", err)
	}
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "gids", "0"), "")
	write(t, filepath.Join(dir, "gids", "1"), "")
	fifo := filepath.Join(dir, "ports")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	names, err := ReadDir(filepath.Join(dir, "gids"))
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"0", "1"}) {
		t.Errorf("ReadDir(gids) = %q, %v", names, err)
	}
	promptly(t, "ReadDir(FIFO)", func() { names, err = ReadDir(fifo) })
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("ReadDir(FIFO) = %q, %v; want ENOTDIR", names, err)
	}
}
