// Package safefile opens and reads files in directories that others can
// write to: the daemon's state directory, and the CDI directory that every
// CDI producer on the host shares. A file there is used only if it is a
// regular file: never through a symbolic link (it could point at another
// instance's file, or at /dev/zero), never a FIFO (opening one for reading
// waits for a writer), a device or a directory, and never more than a
// bound is read (a huge file would cost its size in memory).
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Error is a file that is not a regular file within its bound.
type Error struct {
	Path string
	// What the file is instead, said after its path: "is a FIFO", "is a
	// symbolic link (to "/dev/zero")", "is 2048 bytes long, more than the
	// 1024 it can be".
	What string
	// TooLarge is set for a regular file longer than the bound.
	TooLarge bool
}

func (e *Error) Error() string { return e.Path + " " + e.What }

// Open opens path with flags (os.O_RDONLY, os.O_CREATE|os.O_RDWR, ...);
// perm is the mode of a file that O_CREATE makes. It never follows a
// symbolic link (O_NOFOLLOW), never blocks on a FIFO (O_NONBLOCK), and
// returns an *Error for anything but a regular file: what the path names
// is looked at before it is opened, so that no device is ever opened, and
// the open file is checked again (it may have been swapped meanwhile). max,
// if not 0, bounds the file's length.
func Open(path string, flags int, perm fs.FileMode, max int64) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, notRegular(path, fs.ModeSymlink)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	if max > 0 && fi.Size() > max {
		f.Close()
		return nil, &Error{Path: path, What: fmt.Sprintf("is %d bytes long, more than the %d it can be", fi.Size(), max), TooLarge: true}
	}
	return f, nil
}

// Read returns the content of the regular file path, of at most max bytes
// (see Open). A file that grows past max while it is read is refused too.
func Read(path string, max int64) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, 0, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, &Error{Path: path, What: fmt.Sprintf("is more than the %d bytes it can be", max), TooLarge: true}
	}
	return data, nil
}

func notRegular(path string, m fs.FileMode) *Error {
	if m&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return &Error{Path: path, What: fmt.Sprintf("is a symbolic link (to %q)", target)}
	}
	return &Error{Path: path, What: "is a " + Kind(m)}
}

// Kind names the type of a file of mode m, for messages: "symbolic link",
// "FIFO", "socket", "device", "directory", "special file" (or "regular
// file").
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
