package driver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
	"github.com/rdma-macvlan/rdma-macvlan/internal/safefile"
	"golang.org/x/sys/unix"
)

// stateVersion is written into every record; a newer one is refused rather
// than misread.
const stateVersion = 1

// store keeps one JSON file per network and per endpoint under dir, each
// replaced atomically, so a torn or damaged file costs one object, never the
// others.
type store struct {
	dir  string
	lock *os.File // flock'd: one daemon per state dir
	// onNotDurable is told about a change that is done but whose fsync
	// failed (nil: ignored).
	onNotDurable func(err error)
	// obs times every change (nil: none).
	obs *observing
}

// notDurable reports a change that is in place but not durable. The change
// is done, so the call that made it succeeds; a crash before the next
// successful fsync may bring the old file back, which the start-up
// reconciliation handles like any crash.
func (s *store) notDurable(err error) {
	if s.onNotDurable != nil {
		s.onNotDurable(err)
	}
}

// done turns a not-durable error of a finished change into a warning.
func (s *store) done(err error) error {
	var nd *atomicfile.NotDurableError
	if errors.As(err, &nd) {
		s.notDurable(err)
		return nil
	}
	return err
}

type networkRecord struct {
	Version int      `json:"version"`
	Network *network `json:"network"`
}

type endpointRecord struct {
	Version  int       `json:"version"`
	Endpoint *endpoint `json:"endpoint"`
}

const (
	networksDir  = "networks"
	endpointsDir = "endpoints"
	corruptExt   = ".corrupt"
)

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dir, err)
	}
	for _, sub := range []string{networksDir, endpointsDir} {
		d := filepath.Join(dir, sub)
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create state directory %s: %w", d, err)
		}
		// Records are written into these: never through a symlink.
		if fi, err := os.Lstat(d); err != nil {
			return nil, fmt.Errorf("state directory %s: %w", d, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("state directory %s is a %s, not a directory: move it away (rdma-macvlan creates it)", d, safefile.Kind(fi.Mode()))
		}
	}
	path := filepath.Join(dir, "lock")
	lf, err := openStateFile(path, os.O_CREATE|os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is in use by another rdma-macvlan daemon: stop it or pass another --state-dir", dir)
		}
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	return &store{dir: dir, lock: lf}, nil
}

// Bounds on what the daemon reads from its state directory.
const (
	maxInstanceBytes = 4 << 10
	// maxRecordBytes is far above any record: a request body is at most
	// 1 MiB and a record keeps only its validated part.
	maxRecordBytes = 1 << 20
)

// openStateFile opens a file of the state directory the only way the
// daemon does (see safefile.Open): never through a symbolic link, never
// blocking on a FIFO or a device, and only if it is a regular file. size,
// if not 0, bounds the file's length.
func openStateFile(path string, flags int, size int64) (*os.File, error) {
	f, err := safefile.Open(path, flags, 0o600, size)
	return f, stateFileErr(err)
}

// readStateFile reads a regular file of at most size bytes (see
// openStateFile).
func readStateFile(path string, size int64) ([]byte, error) {
	data, err := safefile.Read(path, size)
	return data, stateFileErr(err)
}

// stateFileError is a file of the state directory that is not what the
// daemon writes there.
type stateFileError struct {
	path     string
	what     string
	tooLarge bool // a regular file, too long to be one the daemon wrote
}

func (e *stateFileError) Error() string {
	return fmt.Sprintf("state file %s %s: rdma-macvlan only uses regular files it wrote itself; move it away (rdma-macvlan makes a new one)", e.path, e.what)
}

// stateFileErr turns a file safefile refused into a stateFileError, which
// says what to do about it.
func stateFileErr(err error) error {
	var bad *safefile.Error
	if errors.As(err, &bad) {
		return &stateFileError{path: bad.Path, what: bad.What, tooLarge: bad.TooLarge}
	}
	return err
}

// instanceID returns the ID of this state directory, creating it on first
// use. Links carry it (as their ifalias) so that a daemon only ever sweeps
// links it made, never those of another instance on the same host. The
// file is read only if it is a regular file (a link to another instance's
// file would make this daemon sweep that instance's links). It is written
// atomically (never torn). When it is missing or unusable, recover is asked
// for the ID this directory's records say their links carry (the file was
// lost, not never written); a new ID is made only when it finds none.
func (s *store) instanceID(recover func() string) (id string, recovered bool, err error) {
	path := filepath.Join(s.dir, "instance")
	data, err := readStateFile(path, maxInstanceBytes)
	var bad *stateFileError
	switch {
	case err == nil:
		if id := strings.TrimSpace(string(data)); idRE.MatchString(id) {
			return id, false, nil
		}
	case errors.As(err, &bad) && bad.tooLarge:
		// A regular file too long to be ours: replaced like one with
		// garbage in it.
	case errors.Is(err, fs.ErrNotExist):
	default:
		return "", false, err
	}
	if recover != nil {
		id = recover()
	}
	recovered = id != ""
	if !recovered {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", false, fmt.Errorf("make instance ID: %w", err)
		}
		id = hex.EncodeToString(b[:])
	}
	if err := s.done(atomicfile.Write(path, []byte(id+"\n"), 0o600, nil)); err != nil {
		return "", false, err
	}
	return id, recovered, nil
}

func (s *store) close() {
	if s.lock != nil {
		s.lock.Close()
	}
}

func (s *store) networkPath(id string) string {
	return filepath.Join(s.dir, networksDir, id+".json")
}

func (s *store) endpointPath(id string) string {
	return filepath.Join(s.dir, endpointsDir, id+".json")
}

// The changes below report to s.obs: the arguments' calls run left to
// right, so time.Now() is taken before the change begins.

func (s *store) saveNetwork(n *network) error {
	return s.done(s.obs.stateWrite(time.Now(), writeJSONAtomic(s.networkPath(n.ID), networkRecord{Version: stateVersion, Network: n})))
}

func (s *store) saveEndpoint(e *endpoint) error {
	return s.done(s.obs.stateWrite(time.Now(), writeJSONAtomic(s.endpointPath(e.ID), endpointRecord{Version: stateVersion, Endpoint: e})))
}

// saveEndpointUnsynced records what Join, Leave and the GID watch learn
// about an endpoint: which namespace its link is in, which GID entries the
// kernel gave it. Those facts live only in the running kernel, so a system
// crash that loses the write loses them too, and the start-up
// reconciliation handles the record as it handles a killed daemon's. A
// killed daemon loses nothing: the page cache outlives the process. So the
// record is replaced atomically without the fsyncs, which would cost about
// a millisecond, and up to tens under I/O load, on each of these calls.
func (s *store) saveEndpointUnsynced(e *endpoint) error {
	data, err := encodeRecord(s.endpointPath(e.ID), endpointRecord{Version: stateVersion, Endpoint: e})
	if err != nil {
		return err
	}
	return s.obs.stateWrite(time.Now(), atomicfile.WriteUnsynced(s.endpointPath(e.ID), data, 0o600, func() { crashPoint("store:temp-written") }))
}

func (s *store) deleteNetwork(id string) error {
	return s.done(s.obs.stateWrite(time.Now(), atomicfile.Remove(s.networkPath(id))))
}

func (s *store) deleteEndpoint(id string) error {
	return s.done(s.obs.stateWrite(time.Now(), atomicfile.Remove(s.endpointPath(id))))
}

// loadProblem is a state file that could not be used. The file is kept,
// renamed with a .corrupt suffix, so nothing is lost and it is not retried.
type loadProblem struct {
	Path string
	Err  error
}

// load reads every record. Unusable files are set aside and reported; they
// never stop the others from loading.
func (s *store) load() ([]*network, []*endpoint, []loadProblem, error) {
	var (
		nets     []*network
		eps      []*endpoint
		problems []loadProblem
	)
	err := s.each(networksDir, func(path string, data []byte) error {
		var r networkRecord
		if err := decodeRecord(data, &r, &r.Version); err != nil {
			return err
		}
		if r.Network == nil || checkID("network", r.Network.ID) != nil || s.networkPath(r.Network.ID) != path {
			return errors.New("record does not match its file name")
		}
		nets = append(nets, r.Network)
		return nil
	}, &problems)
	if err != nil {
		return nil, nil, nil, err
	}
	err = s.each(endpointsDir, func(path string, data []byte) error {
		var r endpointRecord
		if err := decodeRecord(data, &r, &r.Version); err != nil {
			return err
		}
		e := r.Endpoint
		if e == nil || checkID("endpoint", e.ID) != nil || s.endpointPath(e.ID) != path {
			return errors.New("record does not match its file name")
		}
		if e.Ifname != LinkName(e.ID) {
			return fmt.Errorf("link name %q is not the one of endpoint %s", e.Ifname, ShortID(e.ID))
		}
		eps = append(eps, e)
		return nil
	}, &problems)
	if err != nil {
		return nil, nil, nil, err
	}
	return nets, eps, problems, nil
}

func decodeRecord(data []byte, rec any, version *int) error {
	if err := json.Unmarshal(data, rec); err != nil {
		return err
	}
	if *version != stateVersion {
		return fmt.Errorf("state version %d, this daemon reads version %d", *version, stateVersion)
	}
	return nil
}

func (s *store) each(sub string, fn func(path string, data []byte) error, problems *[]loadProblem) error {
	dir := filepath.Join(s.dir, sub)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read state directory %s: %w", dir, err)
	}
	for _, ent := range entries {
		name := ent.Name()
		path := filepath.Join(dir, name)
		switch {
		case atomicfile.IsTemp(name):
			// A write that a crash interrupted; the previous version (if
			// any) is still in place under its real name.
			_ = os.Remove(path)
			continue
		case !strings.HasSuffix(name, ".json") || !ent.Type().IsRegular():
			continue
		}
		data, err := readStateFile(path, maxRecordBytes)
		var bad *stateFileError
		if errors.As(err, &bad) && !bad.tooLarge {
			// Swapped for a link or a FIFO since the listing: skipped,
			// as those found in it.
			continue
		}
		if err == nil {
			err = fn(path, data)
		}
		if err != nil {
			aside := path + corruptExt
			if rerr := os.Rename(path, aside); rerr == nil {
				path = aside
			}
			*problems = append(*problems, loadProblem{Path: path, Err: err})
		}
	}
	return nil
}

// writeJSONAtomic replaces path with the JSON of v: write a temporary file in
// the same directory, fsync it, rename it over path, fsync the directory.
func writeJSONAtomic(path string, v any) (retErr error) {
	data, err := encodeRecord(path, v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600, func() { crashPoint("store:temp-written") })
}

// encodeRecord is the file content of record v, to be written at path.
func encodeRecord(path string, v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	return append(data, '\n'), nil
}

// exposure describes what in the state directory other users could have
// changed: the directories when group- or world-writable, and files or
// directories that belong to another user than the daemon's. Such files are
// still read (through the same rules as every state file), but whoever can
// write them can make the daemon delete links: the operator should know.
func (s *store) exposure() []string {
	var out []string
	uid := uint32(os.Geteuid())
	others := 0
	var sample []string
	check := func(path string, fi fs.FileInfo) {
		if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
			out = append(out, fmt.Sprintf("directory %s is writable by %s (mode %04o): chmod go-w %s", path,
				map[bool]string{true: "every user", false: "its group"}[fi.Mode().Perm()&0o002 != 0], fi.Mode().Perm(), path))
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != uid {
			others++
			if len(sample) < 5 {
				sample = append(sample, fmt.Sprintf("%s (uid %d)", path, st.Uid))
			}
		}
	}
	for _, d := range []string{s.dir, filepath.Join(s.dir, networksDir), filepath.Join(s.dir, endpointsDir)} {
		fi, err := os.Stat(d)
		if err != nil {
			continue
		}
		check(d, fi)
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, ent := range ents {
			if ent.IsDir() && (ent.Name() == networksDir || ent.Name() == endpointsDir) {
				continue // checked as directories
			}
			if fi, err := ent.Info(); err == nil {
				check(filepath.Join(d, ent.Name()), fi)
			}
		}
	}
	if others > 0 {
		out = append(out, fmt.Sprintf("%d files in the state directory belong to another user than rdma-macvlan's (uid %d): %s: check who wrote them",
			others, uid, strings.Join(sample, ", ")))
	}
	return out
}
