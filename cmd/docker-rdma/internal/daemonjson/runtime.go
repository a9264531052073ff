package daemonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RuntimeName is the name the runtime is registered under
// (docker run --runtime rdma-macvlan).
const RuntimeName = "rdma-macvlan"

// The members install sets, as dotted paths.
const (
	keyRuntimes = "runtimes"
	keyRuntime  = "runtimes." + RuntimeName
	keyDefault  = "default-runtime"
)

// RecordVersion is the version of Record this code writes and reads.
const RecordVersion = 1

// Record is what install changed in a config file, so that uninstall
// undoes exactly that. It is kept beside the file (docker rdma runtime
// keeps it in FILE.rdma-macvlan).
type Record struct {
	Version int `json:"version"`
	// Created: install created the file.
	Created bool `json:"created,omitempty"`
	// Original is the file before the first install; kept only while the
	// file is as install left it (Written).
	Original []byte `json:"original,omitempty"`
	// Written is the sha256 of the file as install last wrote it.
	Written string `json:"written_sha256"`
	// Changes are the members install set, in the order it set them.
	Changes []Change `json:"changes"`
}

// Change is one member install set.
type Change struct {
	Key string `json:"key"` // dotted path: runtimes, runtimes.rdma-macvlan, default-runtime
	// Before is the member's value before the first install; absent when
	// there was no such member.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after"`
}

// Runtime is the runtime's entry in runtimes.
type Runtime struct {
	Path string   `json:"path"`
	Args []string `json:"runtimeArgs,omitempty"`
}

// Install is what install is asked to do.
type Install struct {
	Runtime Runtime
	// Default makes the runtime the default-runtime.
	Default bool
}

// ErrDefaultRuntimeTaken is a default-runtime that install does not
// replace: one other than runc and rdma-macvlan.
var ErrDefaultRuntimeTaken = errors.New("default-runtime is set to another runtime")

func hash(doc []byte) string {
	s := sha256.Sum256(doc)
	return hex.EncodeToString(s[:])
}

func path(key string) []string { return strings.Split(key, ".") }

// Apply sets the runtime (and default-runtime) in doc, the config file's
// content (exists false: there is no file; doc is ignored). prev is the
// record of an earlier install, nil when none. It returns the new content,
// the record to keep and the changes it made, none when the file already
// says what is asked.
func (in Install) Apply(doc []byte, exists bool, prev *Record) ([]byte, *Record, []Change, error) {
	if !exists {
		doc = []byte("{}\n")
	}
	if err := check(doc); err != nil {
		return nil, nil, nil, err
	}
	want, err := json.Marshal(in.Runtime)
	if err != nil {
		return nil, nil, nil, err
	}
	out := doc
	var changes []Change
	rts, found, err := lookup(out, path(keyRuntimes))
	switch {
	case err != nil:
		return nil, nil, nil, err
	case found && (len(rts) == 0 || rts[0] != '{'):
		return nil, nil, nil, fmt.Errorf("%s is not a JSON object: %s", keyRuntimes, compact(rts))
	case !found:
		if out, err = set(out, path(keyRuntimes), []byte("{}")); err != nil {
			return nil, nil, nil, err
		}
		changes = append(changes, Change{Key: keyRuntimes, After: json.RawMessage("{}")})
	}
	cur, found, err := lookup(out, path(keyRuntime))
	if err != nil {
		return nil, nil, nil, err
	}
	if !found || !sameJSON(cur, want) {
		c := Change{Key: keyRuntime, After: want}
		if found {
			c.Before = compact(cur)
		}
		if out, err = set(out, path(keyRuntime), want); err != nil {
			return nil, nil, nil, err
		}
		changes = append(changes, c)
	}
	if in.Default {
		cur, found, err := lookup(out, path(keyDefault))
		if err != nil {
			return nil, nil, nil, err
		}
		var name string
		if found {
			if err := json.Unmarshal(cur, &name); err != nil {
				return nil, nil, nil, fmt.Errorf("%s is not a string: %s", keyDefault, compact(cur))
			}
		}
		switch {
		case name == RuntimeName:
		case found && name != "runc" && name != "":
			return nil, nil, nil, fmt.Errorf("%w: %s is %q", ErrDefaultRuntimeTaken, keyDefault, name)
		default:
			after, _ := json.Marshal(RuntimeName)
			c := Change{Key: keyDefault, After: after}
			if found {
				c.Before = compact(cur)
			}
			if out, err = set(out, path(keyDefault), after); err != nil {
				return nil, nil, nil, err
			}
			changes = append(changes, c)
		}
	}
	if len(changes) == 0 {
		return doc, prev, nil, nil
	}
	return out, merge(prev, doc, exists, out, changes), changes, nil
}

// merge records changes made to doc (the file before, exists: there was
// one) that gave out, on top of an earlier install's record: what a member
// was before the first install stays its Before.
func merge(prev *Record, doc []byte, exists bool, out []byte, changes []Change) *Record {
	rec := &Record{Version: RecordVersion, Written: hash(out)}
	if prev == nil {
		rec.Created = !exists
		if exists {
			rec.Original = doc
		}
	} else {
		rec.Changes = append(rec.Changes, prev.Changes...)
		if exists && prev.Written == hash(doc) {
			// Nobody touched the file since: its original still holds.
			rec.Created, rec.Original = prev.Created, prev.Original
		}
	}
	for _, c := range changes {
		done := false
		for i := range rec.Changes {
			if rec.Changes[i].Key == c.Key {
				rec.Changes[i].After = c.After
				done = true
			}
		}
		if !done {
			rec.Changes = append(rec.Changes, c)
		}
	}
	return rec
}

// Kept is a member uninstall left as it is: it was changed after install.
type Kept struct {
	Key string
	Now json.RawMessage // absent: the member is gone
}

// Undo is what uninstall does to a config file.
type Undo struct {
	// Content is the file's new content; with Remove the file is to be
	// removed instead (install created it and nobody changed it since).
	// When the file is gone, both are empty and every change is Kept.
	Content []byte
	Remove  bool
	// Whole: the file is put back byte for byte as it was before install.
	Whole bool
	// Undone are the changes undone; Kept those left as they are.
	Undone []Change
	Kept   []Kept
}

// Revert undoes rec in doc, the config file's content (exists false: the
// file is gone). When the file is as install left it, it is put back as it
// was (or removed, when install created it); else each member install set
// and nobody changed since is put back, in reverse order.
func Revert(doc []byte, exists bool, rec *Record) (Undo, error) {
	if exists && hash(doc) == rec.Written && (rec.Created || rec.Original != nil) {
		return Undo{Content: rec.Original, Remove: rec.Created, Whole: true, Undone: rec.Changes}, nil
	}
	if !exists {
		var u Undo
		for _, c := range rec.Changes {
			u.Kept = append(u.Kept, Kept{Key: c.Key})
		}
		return u, nil
	}
	if err := check(doc); err != nil {
		return Undo{}, err
	}
	u := Undo{Content: doc}
	for i := len(rec.Changes) - 1; i >= 0; i-- {
		c := rec.Changes[i]
		cur, found, err := lookup(u.Content, path(c.Key))
		if err != nil {
			return Undo{}, err
		}
		if !found || !sameJSON(cur, c.After) {
			k := Kept{Key: c.Key}
			if found {
				k.Now = compact(cur)
			}
			u.Kept = append(u.Kept, k)
			continue
		}
		if c.Before == nil {
			u.Content, err = remove(u.Content, path(c.Key))
		} else {
			u.Content, err = set(u.Content, path(c.Key), c.Before)
		}
		if err != nil {
			return Undo{}, err
		}
		u.Undone = append(u.Undone, c)
	}
	return u, nil
}
