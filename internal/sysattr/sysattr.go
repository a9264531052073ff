// Package sysattr reads sysfs attributes without trusting what the path
// names. A sysfs attribute is a regular file of at most one page, which the
// kernel answers at once; a FIFO, a device or a link to /dev/zero found
// where an attribute should be (a fake tree, a bind mount over /sys) is
// refused before anything is read from it, and no read takes more than a
// page. rdma-exec, the daemon and docker rdma all read sysfs through it. It
// uses only the os and syscall packages, so that rdma-exec stays small.
package sysattr

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// MaxSize bounds what is read of one attribute: the kernel serves a sysfs
// attribute from one page (4096 bytes on x86-64).
const MaxSize = 4096

// Error is a path that holds no sysfs attribute.
type Error struct {
	Path string
	// What the path is instead, said after it: "is a FIFO", "is a
	// symbolic link", "is longer than 4096 bytes".
	What string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s, not a sysfs attribute (a regular file of at most %d bytes)", e.Path, e.What, MaxSize)
}

// Read returns the attribute at path with surrounding white space trimmed,
// read into buf (a buffer of MaxSize when buf is nil or longer): an
// attribute longer than buf is refused, so is anything but a regular file
// (never followed when it is a symbolic link). The open never blocks
// (O_NONBLOCK: a FIFO does not wait for a writer), and the file's type is
// checked on the open file before the first read.
// Equivalent to: cat PATH
func Read(path string, buf []byte) (string, error) {
	if len(buf) == 0 || len(buf) > MaxSize {
		buf = make([]byte, MaxSize)
	}
	fd, err := open(path, syscall.O_NOFOLLOW)
	if err == syscall.ELOOP {
		return "", &Error{Path: path, What: "is a symbolic link"}
	}
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", &Error{Path: path, What: "is a " + kind(st.Mode)}
	}
	// One read: the kernel hands out a sysfs attribute whole, as a
	// regular file's read does all it can.
	n, err := read(fd, buf)
	if err != nil {
		return "", &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n == len(buf) {
		var more [1]byte
		if m, _ := read(fd, more[:]); m > 0 {
			return "", &Error{Path: path, What: fmt.Sprintf("is longer than %d bytes", len(buf))}
		}
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// ReadDir returns the names in the directory dir, unsorted. Anything but a
// directory is refused by the open (O_DIRECTORY), which then opens nothing.
// Equivalent to: ls -U DIR
func ReadDir(dir string) ([]string, error) {
	fd, err := open(dir, syscall.O_DIRECTORY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	return f.Readdirnames(-1)
}

func open(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func read(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if err != syscall.EINTR {
			return max(n, 0), err
		}
	}
}

func kind(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "FIFO"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFSOCK:
		return "socket"
	}
	return "special file"
}
