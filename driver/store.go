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

	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
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
}

type networkRecord struct {
	Version int      `json:"version"`
	Network *Network `json:"network"`
}

type endpointRecord struct {
	Version  int       `json:"version"`
	Endpoint *Endpoint `json:"endpoint"`
}

const (
	networksDir  = "networks"
	endpointsDir = "endpoints"
	corruptExt   = ".corrupt"
)

func openStore(dir string) (*store, error) {
	for _, d := range []string{dir, filepath.Join(dir, networksDir), filepath.Join(dir, endpointsDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create state directory %s: %w", d, err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file in %s: %w", dir, err)
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

// instanceID returns the ID of this state directory, creating it on first
// use. Links carry it (as their ifalias) so that a daemon only ever sweeps
// links it made, never those of another instance on the same host.
func (s *store) instanceID() (string, error) {
	path := filepath.Join(s.dir, "instance")
	data, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(data)); idRE.MatchString(id) {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make instance ID: %w", err)
	}
	id := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return id, atomicfile.SyncDir(s.dir)
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

func (s *store) saveNetwork(n *Network) error {
	return writeJSONAtomic(s.networkPath(n.ID), networkRecord{Version: stateVersion, Network: n})
}

func (s *store) saveEndpoint(e *Endpoint) error {
	return writeJSONAtomic(s.endpointPath(e.ID), endpointRecord{Version: stateVersion, Endpoint: e})
}

func (s *store) deleteNetwork(id string) error { return removeSynced(s.networkPath(id)) }

func (s *store) deleteEndpoint(id string) error { return removeSynced(s.endpointPath(id)) }

// loadProblem is a state file that could not be used. The file is kept,
// renamed with a .corrupt suffix, so nothing is lost and it is not retried.
type loadProblem struct {
	Path string
	Err  error
}

// load reads every record. Unusable files are set aside and reported; they
// never stop the others from loading.
func (s *store) load() ([]*Network, []*Endpoint, []loadProblem, error) {
	var (
		nets     []*Network
		eps      []*Endpoint
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
		data, err := os.ReadFile(path)
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
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	data = append(data, '\n')
	return atomicfile.Write(path, data, 0o600, func() { crashPoint("store:temp-written") })
}

func removeSynced(path string) error { return atomicfile.Remove(path) }
