package daemonjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var testRuntime = Runtime{Path: "/usr/local/lib/rdma-macvlan/rdma-macvlan-runtime", Args: []string{"--cdi-dir", "/etc/cdi"}}

// The daemon.json files install meets: written by hand (4 spaces, tabs),
// by a tool (compact), empty, with runtimes and default-runtime already.
var docs = map[string]string{
	"four spaces": `{
    "log-level": "info",
    "runtimes": {
        "nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}
    },
    "storage-driver": "overlay2",
    "default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, "Soft": -1}}
}
`,
	"tabs, no runtimes": "{\n\t\"debug\": true,\n\t\"hosts\": [\"unix:///var/run/docker.sock\"],\n\t\"features\": {\"cdi\": true}\n}\n",
	"compact":           `{"data-root":"/srv/docker","live-restore":true}`,
	"empty object":      "{}\n",
	"empty runtimes":    "{\n  \"runtimes\": {},\n  \"iptables\": false\n}\n",
	"default runc":      "{\n  \"default-runtime\": \"runc\",\n  \"zz\": \"\\\"}{,\"\n}\n",
}

// members returns the top-level keys of doc in order and each value's
// bytes.
func members(t *testing.T, doc []byte) ([]string, map[string]string) {
	t.Helper()
	o, err := top(doc)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	vals := map[string]string{}
	for _, m := range o.members {
		keys = append(keys, m.key)
		vals[m.key] = string(doc[m.valStart:m.valEnd])
	}
	return keys, vals
}

func apply(t *testing.T, in Install, doc []byte, prev *Record) ([]byte, *Record, []Change) {
	t.Helper()
	out, rec, ch, err := in.Apply(doc, true, prev)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return out, rec, ch
}

func TestApplyKeepsEveryOtherMember(t *testing.T) {
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			out, _, _ := apply(t, Install{Runtime: testRuntime, Default: true}, []byte(doc), nil)
			var got struct {
				Default  string                     `json:"default-runtime"`
				Runtimes map[string]json.RawMessage `json:"runtimes"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			want, _ := json.Marshal(testRuntime)
			if !sameJSON(got.Runtimes[RuntimeName], want) || got.Default != RuntimeName {
				t.Fatalf("runtime not installed:\n%s", out)
			}
			inKeys, inVals := members(t, []byte(doc))
			outKeys, outVals := members(t, out)
			if strings.Join(outKeys[:len(inKeys)], ",") != strings.Join(inKeys, ",") {
				t.Errorf("key order changed: %v -> %v", inKeys, outKeys)
			}
			for k, v := range inVals {
				if k == "runtimes" || k == "default-runtime" {
					continue
				}
				if outVals[k] != v {
					t.Errorf("%s changed: %s -> %s", k, v, outVals[k])
				}
			}
			if strings.Contains(doc, "nvidia") && !strings.Contains(string(out), `"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}`) {
				t.Errorf("the nvidia runtime's bytes changed:\n%s", out)
			}
		})
	}
}

// The exact files install writes, in the file's own layout.
func TestApplyWritesInTheFilesLayout(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"four spaces", docs["four spaces"], `{
    "log-level": "info",
    "runtimes": {
        "nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []},
        "rdma-macvlan": {
            "path": "/usr/local/lib/rdma-macvlan/rdma-macvlan-runtime",
            "runtimeArgs": [
                "--cdi-dir",
                "/etc/cdi"
            ]
        }
    },
    "storage-driver": "overlay2",
    "default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, "Soft": -1}},
    "default-runtime": "rdma-macvlan"
}
`},
		{"compact", docs["compact"], `{"data-root":"/srv/docker","live-restore":true,"runtimes":{"rdma-macvlan":{"path":"/usr/local/lib/rdma-macvlan/rdma-macvlan-runtime","runtimeArgs":["--cdi-dir","/etc/cdi"]}},"default-runtime":"rdma-macvlan"}`},
		{"empty runtimes", docs["empty runtimes"], `{
  "runtimes": {
    "rdma-macvlan": {
      "path": "/usr/local/lib/rdma-macvlan/rdma-macvlan-runtime",
      "runtimeArgs": [
        "--cdi-dir",
        "/etc/cdi"
      ]
    }
  },
  "iptables": false,
  "default-runtime": "rdma-macvlan"
}
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, _ := apply(t, Install{Runtime: testRuntime, Default: true}, []byte(c.in), nil)
			if string(out) != c.want {
				t.Errorf("got\n%s\nwant\n%s", out, c.want)
			}
		})
	}
}

func TestApplyTwiceChangesNothing(t *testing.T) {
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			in := Install{Runtime: testRuntime, Default: true}
			out, rec, _ := apply(t, in, []byte(doc), nil)
			again, rec2, ch := apply(t, in, out, rec)
			if len(ch) != 0 || string(again) != string(out) || rec2 != rec {
				t.Errorf("second install changed %v:\n%s", ch, again)
			}
		})
	}
}

// Uninstall right after install puts back the file byte for byte; with
// another member changed since, it undoes each member and keeps that
// change, still byte for byte.
func TestRevertRestoresTheFile(t *testing.T) {
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			out, rec, _ := apply(t, Install{Runtime: testRuntime, Default: true}, []byte(doc), nil)
			u, err := Revert(out, true, rec)
			if err != nil {
				t.Fatal(err)
			}
			if !u.Whole || u.Remove || string(u.Content) != doc {
				t.Errorf("uninstall right after install: whole %v, got\n%s\nwant\n%s", u.Whole, u.Content, doc)
			}

			// Someone adds a member after install.
			edit := func(d []byte) []byte {
				b, err := set(d, []string{"experimental"}, []byte("true"))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			u, err = Revert(edit(out), true, rec)
			if err != nil {
				t.Fatal(err)
			}
			if u.Whole || len(u.Kept) != 0 || string(u.Content) != string(edit([]byte(doc))) {
				t.Errorf("uninstall after an edit: kept %v, got\n%s\nwant\n%s", u.Kept, u.Content, edit([]byte(doc)))
			}
		})
	}
}

func TestRevertRemovesTheFileItCreated(t *testing.T) {
	out, rec, _, err := Install{Runtime: testRuntime}.Apply(nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Created {
		t.Fatal("the record does not say install created the file")
	}
	u, err := Revert(out, true, rec)
	if err != nil || !u.Remove {
		t.Fatalf("uninstall keeps the file install created: %+v, %v", u, err)
	}
	// Changed since: the file stays, with what else it has.
	edited, _ := set(out, []string{"debug"}, []byte("true"))
	u, err = Revert(edited, true, rec)
	if err != nil || u.Remove || string(u.Content) != "{\n  \"debug\": true\n}\n" {
		t.Fatalf("uninstall of a created file changed since: remove %v, got %q, %v", u.Remove, u.Content, err)
	}
}

func TestDefaultRuntime(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		changed   bool   // default-runtime is changed
		taken     string // install refuses: default-runtime is this
	}{
		{"absent", `{"debug": true}`, true, ""},
		{"runc", `{"default-runtime": "runc"}`, true, ""},
		{"rdma-macvlan already", `{"default-runtime": "rdma-macvlan"}`, false, ""},
		{"nvidia", `{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}`, false, "nvidia"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, rec, ch, err := Install{Runtime: testRuntime, Default: true}.Apply([]byte(c.doc), true, nil)
			if c.taken != "" {
				if !errors.Is(err, ErrDefaultRuntimeTaken) || !strings.Contains(err.Error(), `"`+c.taken+`"`) {
					t.Fatalf("install over default-runtime %s: %v, want ErrDefaultRuntimeTaken naming it", c.taken, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			changed := false
			for _, x := range ch {
				changed = changed || x.Key == keyDefault
			}
			if changed != c.changed {
				t.Errorf("default-runtime changed: %v, want %v (%v)", changed, c.changed, ch)
			}
			// Undo member by member (the file was touched since).
			touched := append(append([]byte{}, out...), '\n')
			u, err := Revert(touched, true, rec)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(u.Content, []byte(c.doc)) {
				t.Errorf("uninstall: got %s, want %s", u.Content, c.doc)
			}
		})
	}
}

func TestRevertKeepsWhatWasChangedSince(t *testing.T) {
	doc := []byte("{\n  \"default-runtime\": \"runc\"\n}\n")
	out, rec, _ := apply(t, Install{Runtime: testRuntime, Default: true}, doc, nil)
	out, _ = set(out, []string{"default-runtime"}, []byte(`"crun"`))
	u, err := Revert(out, true, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Kept) != 1 || u.Kept[0].Key != keyDefault || string(u.Kept[0].Now) != `"crun"` {
		t.Fatalf("kept %+v, want default-runtime now \"crun\"", u.Kept)
	}
	if want := "{\n  \"default-runtime\": \"crun\"\n}\n"; string(u.Content) != want {
		t.Errorf("got\n%s\nwant\n%s", u.Content, want)
	}
}

// A second install with another path changes the entry; uninstall goes
// back to what was there before the first one.
func TestReinstallKeepsTheFirstBefore(t *testing.T) {
	doc := []byte(`{"runtimes": {"rdma-macvlan": {"path": "/opt/old"}}, "default-runtime": "runc"}`)
	out, rec, _ := apply(t, Install{Runtime: testRuntime, Default: true}, doc, nil)
	out2, rec2, ch := apply(t, Install{Runtime: Runtime{Path: "/opt/new"}}, out, rec)
	if len(ch) != 1 || ch[0].Key != keyRuntime {
		t.Fatalf("second install changed %v, want only %s", ch, keyRuntime)
	}
	for _, c := range rec2.Changes {
		if c.Key == keyRuntime && !sameJSON(c.Before, []byte(`{"path": "/opt/old"}`)) {
			t.Errorf("the record's before is %s, want the first install's", c.Before)
		}
	}
	u, err := Revert(out2, true, rec2)
	if err != nil {
		t.Fatal(err)
	}
	if string(u.Content) != string(doc) {
		t.Errorf("got %s, want %s", u.Content, doc)
	}
}

func TestApplyRefusesWhatIsNotADaemonJSON(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"trailing comma", "{\n  \"debug\": true,\n}\n", "byte 20 (line 3, column 1)"},
		{"truncated", `{"debug": tr`, "invalid JSON at byte 12"},
		{"array", `[1]`, "not a JSON object"},
		{"runtimes not an object", `{"runtimes": []}`, "runtimes is not a JSON object"},
		{"default not a string", `{"default-runtime": 1}`, "default-runtime is not a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := Install{Runtime: testRuntime, Default: true}.Apply([]byte(c.doc), true, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
