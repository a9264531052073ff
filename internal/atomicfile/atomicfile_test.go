package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The test binary doubles as a writer that dies or is starved mid-write:
// with ATOMICFILE_CHILD set, TestMain runs it instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("ATOMICFILE_CHILD") {
	case "":
		os.Exit(m.Run())
	case "crash":
		// Dies between the temporary file and the rename, as a kill -9
		// or power loss there would.
		_ = Write(os.Getenv("ATOMICFILE_PATH"), []byte("new content"), 0o600, func() { os.Exit(3) })
		os.Exit(0)
	case "fsize":
		// A file size limit makes the write itself fail (EFBIG), for root
		// too. Go ignores SIGXFSZ, so the write returns the error.
		lim := syscall.Rlimit{Cur: 1024, Max: 1024}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(4)
		}
		err := Write(os.Getenv("ATOMICFILE_PATH"), bytes.Repeat([]byte("x"), 64<<10), 0o600, nil)
		fmt.Println(err)
		os.Exit(0)
	}
	os.Exit(5)
}

func child(t *testing.T, mode, path string) (exitCode int, out string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD="+mode, "ATOMICFILE_PATH="+path)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(b)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// temps lists the temporary files Write left in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if IsTemp(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Write creates and replaces the file with exactly the given content and
// permissions (whatever the umask), leaving no temporary file.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.json")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for i, c := range []struct {
		data string
		perm fs.FileMode
	}{{"first, a longer content", 0o600}, {"second", 0o644}, {"", 0o640}} {
		if err := Write(path, []byte(c.data), c.perm, nil); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got := read(t, path); got != c.data {
			t.Fatalf("write %d: content %q, want %q", i, got, c.data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.perm {
			t.Fatalf("write %d: mode %v, want %v", i, fi.Mode().Perm(), c.perm)
		}
		if l := temps(t, dir); len(l) != 0 {
			t.Fatalf("write %d left %v", i, l)
		}
	}
}

// Until the rename the file holds the old version, whole; the new one is
// complete and synced in a hidden temporary file beside it; after Write the
// file holds the new version.
func TestWriteTouchesTheFileOnlyByRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.json")
	old, next := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<19)
	if err := Write(path, old, 0o644, nil); err != nil {
		t.Fatal(err)
	}
	called := false
	err := Write(path, next, 0o644, func() {
		called = true
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
			t.Errorf("before the rename the file holds %d bytes (%v), want the old %d", len(got), err, len(old))
		}
		l := temps(t, dir)
		if len(l) != 1 {
			t.Fatalf("before the rename: temporary files %v, want one", l)
		}
		if got, err := os.ReadFile(filepath.Join(dir, l[0])); err != nil || !bytes.Equal(got, next) {
			t.Errorf("before the rename the temporary file holds %d bytes (%v), want the new %d", len(got), err, len(next))
		}
	})
	if err != nil || !called {
		t.Fatalf("write: %v (hook called: %v)", err, called)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, next) {
		t.Fatalf("after the write the file holds %d bytes, want the new %d", len(got), len(next))
	}
}

// A writer that dies before its rename leaves the old content in place and
// a hidden temporary file that readers skip (IsTemp) and Remove clears.
func TestWriteCrashLeavesOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "net.json")
	if err := Write(path, []byte("old content"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if code, out := child(t, "crash", path); code != 3 {
		t.Fatalf("the writer exited %d, want 3 (died before its rename): %s", code, out)
	}
	if got := read(t, path); got != "old content" {
		t.Fatalf("after a crash before the rename: %q, want the old content", got)
	}
	left := temps(t, dir)
	if len(left) != 1 || !strings.HasPrefix(left[0], ".net.json.tmp-") {
		t.Fatalf("temporary files after the crash: %v, want one .net.json.tmp-*", left)
	}
	if got := read(t, filepath.Join(dir, left[0])); got != "new content" {
		t.Fatalf("the temporary file holds %q, want the whole new content (written and synced before the rename)", got)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Remove left %v", ents)
	}
}

// A write that fails (here: a file size limit, which binds root too) keeps
// the old content and leaves no temporary file.
func TestWriteFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ep.json")
	if err := Write(path, []byte("old"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	code, out := child(t, "fsize", path)
	if code != 0 || !strings.Contains(out, "file too large") || !strings.Contains(out, "ep.json") {
		t.Fatalf("writer under a 1 KiB size limit: exit %d, %q; want a 'file too large' error naming the file", code, out)
	}
	if got := read(t, path); got != "old" {
		t.Fatalf("after a failed write: %q, want the old content", got)
	}
	if l := temps(t, dir); len(l) != 0 {
		t.Fatalf("a failed write left %v", l)
	}
}

// A rename that fails (the path is a directory: refused to root as well)
// leaves the directory as it was and no temporary file; a missing
// directory is an error naming the path.
func TestWriteRenameAndCreateFailures(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []byte("x"), 0o600, nil)
	if err == nil || !strings.Contains(err.Error(), "rename") {
		t.Fatalf("write over a directory: %v, want a rename error", err)
	}
	if fi, err := os.Stat(filepath.Join(path, "inside")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory was touched: %v", err)
	}
	if l := temps(t, dir); len(l) != 0 {
		t.Fatalf("a failed rename left %v", l)
	}
	missing := filepath.Join(dir, "nodir", "f.json")
	if err := Write(missing, []byte("x"), 0o600, nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("write into a missing directory: %v, want ErrNotExist naming %s", err, missing)
	}
}

// When the directory fsync fails the change is in place but reported as
// not durable, for Write and Remove alike; the cause is kept.
func TestNotDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cdi.json")
	restore := FailDirSync(syscall.EIO)
	defer restore()

	err := Write(path, []byte("v1"), 0o644, nil)
	var nd *NotDurableError
	if !errors.As(err, &nd) || nd.Path != path || !errors.Is(err, syscall.EIO) {
		t.Fatalf("write with a failing directory fsync: %v, want a NotDurableError for %s wrapping EIO", err, path)
	}
	if !strings.Contains(err.Error(), "in place but not durable") {
		t.Errorf("message %q does not say the change is in place", err)
	}
	if got := read(t, path); got != "v1" {
		t.Fatalf("the not-durable write is not in place: %q", got)
	}
	err = Remove(path)
	if !errors.As(err, &nd) || nd.Path != path || !errors.Is(err, syscall.EIO) {
		t.Fatalf("remove with a failing directory fsync: %v, want a NotDurableError wrapping EIO", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the not-durable remove is not done: %v", err)
	}

	restore()
	if err := Write(path, []byte("v2"), 0o644, nil); err != nil {
		t.Fatalf("after the fault is lifted: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("removing a missing file: %v, want nil", err)
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".rec.json.tmp-123": true, "rec.json": false, ".rec.json": false, "rec.json.tmp-1": false,
	} {
		if IsTemp(name) != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, !want, want)
		}
	}
}

// WriteUnsynced replaces the file as Write does, leaves no temporary file,
// and makes no fsync: a failing directory fsync does not concern it.
func TestWriteUnsynced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ep.json")
	if err := Write(path, []byte("v1"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	restore := FailDirSync(syscall.EIO)
	defer restore()
	before := Syncs()
	if err := WriteUnsynced(path, []byte("v2"), 0o600, nil); err != nil {
		t.Fatalf("WriteUnsynced: %v", err)
	}
	if n := Syncs() - before; n != 0 {
		t.Errorf("WriteUnsynced made %d fsyncs, want none", n)
	}
	if got := read(t, path); got != "v2" {
		t.Fatalf("content %q, want v2", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(ents))
	}
	restore()
	before = Syncs()
	if err := Write(path, []byte("v3"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if n := Syncs() - before; n != 2 {
		t.Errorf("Write made %d fsyncs, want 2 (the file, its directory)", n)
	}
}
