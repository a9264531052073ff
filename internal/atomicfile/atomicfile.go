// Package atomicfile replaces files so that after a crash a reader finds the
// old content or the new one, never a part: the state store and the CDI
// specs are written this way.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// IsTemp reports whether name (a base name) is a temporary file of Write:
// hidden, so that readers listing *.json (CDI caches, the state store)
// never take it for a real file.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// dirSyncFault, when set, is the error every directory fsync fails with
// (FailDirSync).
var dirSyncFault atomic.Pointer[error]

func syncDir(d *os.File) error {
	syncs.Add(1)
	if err := dirSyncFault.Load(); err != nil {
		return *err
	}
	return d.Sync()
}

// syncs counts the fsyncs of files and directories this package made.
var syncs atomic.Int64

// Syncs returns how many fsyncs (of files and of directories) this process
// has made through this package: tests count what an operation costs.
func Syncs() int64 { return syncs.Load() }

// FailDirSync makes every directory fsync fail with err until the returned
// function is called. Only for tests, which must not run in parallel with
// others writing files: it stands in for a disk that fails fsync (EIO),
// which a test cannot provoke on a real file system.
func FailDirSync(err error) (restore func()) {
	dirSyncFault.Store(&err)
	return func() { dirSyncFault.Store(nil) }
}

// Write replaces path with data: write a temporary file in the same
// directory, fsync it, call beforeRename (if not nil; tests kill the process
// there), rename it over path and fsync the directory.
func Write(path string, data []byte, perm fs.FileMode, beforeRename func()) error {
	return write(path, data, perm, beforeRename, true)
}

// WriteUnsynced is Write without the two fsyncs: a reader, or the writer
// restarted after being killed, finds the old content or the new one, as
// with Write; only a crash of the whole system (power loss, kernel panic)
// before the kernel writes the page cache back may bring back the old
// file, or, on file systems that do not order data before a rename, an
// empty one. For records of facts that such a crash destroys anyway.
func WriteUnsynced(path string, data []byte, perm fs.FileMode, beforeRename func()) error {
	return write(path, data, perm, beforeRename, false)
}

func write(path string, data []byte, perm fs.FileMode, beforeRename func(), durable bool) (retErr error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if retErr != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if durable {
		syncs.Add(1)
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if !durable {
		return nil
	}
	if err := SyncDir(dir); err != nil {
		return &NotDurableError{Path: path, Err: err}
	}
	return nil
}

// NotDurableError reports a change that is done (readers see the new file,
// or no file) but that a crash could still undo: the fsync of its directory
// failed. Retrying the change is safe.
type NotDurableError struct {
	Path string
	Err  error
}

func (e *NotDurableError) Error() string {
	return fmt.Sprintf("%s is in place but not durable (a crash may undo it): %v", e.Path, e.Err)
}

func (e *NotDurableError) Unwrap() error { return e.Err }

// Remove deletes path (a missing file is not an error), any temporary file
// a crashed Write left beside it, and makes the removal durable.
func Remove(path string) error {
	if leftovers, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")); err == nil {
		for _, l := range leftovers {
			_ = os.Remove(l) // best effort: a stale temporary file is harmless
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &NotDurableError{Path: path, Err: err}
	}
	return nil
}

// SyncDir fsyncs a directory, making renames and removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := syncDir(d); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
