// Package userfile reads the small files a user points docker rdma at (an
// env file, the docker CLI's config and context store): only regular
// files, and only up to a size bound, so that a FIFO cannot hang the
// command and a link to /dev/zero cannot fill its memory. Unlike
// internal/safefile, which guards directories others can write to, it
// follows symbolic links: a user's dotfiles are often links into a
// repository of them.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxSize bounds every file read here. An env file or a context's
// meta.json is a few hundred bytes; the docker CLI's config.json, with
// credentials for many registries and its plugin settings, stays in the
// kilobytes. 4 MiB is far above any of them and far below memory trouble.
const MaxSize = 4 << 20

// ErrNotRegular is what Read returns, wrapped, for a FIFO, device,
// directory or socket.
var ErrNotRegular = errors.New("not a regular file")

// Read returns the contents of the regular file at path (symlinks
// followed), refusing anything else and anything over max bytes. What the
// path names is looked at before it is opened, so that no device is
// opened (opening some has effects of its own); the open never blocks (a
// FIFO swapped in meanwhile would block open itself) and the open file is
// checked again, so what is read is what was checked. Every error is an
// *fs.PathError naming the file (errors.Is finds fs.ErrNotExist, and
// ErrNotRegular).
func Read(path string, max int64) ([]byte, error) {
	if fi, err := os.Stat(path); err == nil {
		if err := check(path, fi, max); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(path, fi, max); err != nil {
		return nil, err
	}
	// A file can be longer than its size says (it grew, or it is one
	// of /proc's, all of size 0): read at most one byte more than the
	// bound to tell.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than the %d bytes docker rdma reads of such a file: give a smaller file", max)}
	}
	return b, nil
}

// check refuses what is not a regular file of at most max bytes.
func check(path string, fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%s, %w: give a regular file", kind(fi.Mode()), ErrNotRegular)}
	}
	if fi.Size() > max {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, over the %d docker rdma reads of such a file: give a smaller file", fi.Size(), max)}
	}
	return nil
}

// kind names what a non-regular file is, for the error.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "a file of type " + m.Type().String()
}
