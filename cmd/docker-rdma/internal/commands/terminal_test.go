package commands

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// evilName is a network name that would, printed raw, retitle the
// terminal window, ring its bell, start a row of its own, turn the text
// red (C1 CSI) and hide a character (DEL).
const evilName = "ev\x1b]0;owned\x07il\n\tfake row\u009b31m\x7f"

// evilShown is evilName as the printers show it.
const evilShown = `ev\x1b]0;owned\ail\n\tfake row\u009b31m\x7f`

// rawControls returns the control characters (other than newline) and
// the bytes that are not UTF-8 that out holds.
func rawControls(out string) []string {
	var bad []string
	for i, r := range out {
		if _, n := utf8.DecodeRuneInString(out[i:]); r == utf8.RuneError && n == 1 {
			bad = append(bad, fmt.Sprintf("byte %#x", out[i]))
		} else if r < 0x20 && r != '\n' || r >= 0x7f && r < 0xa0 {
			bad = append(bad, fmt.Sprintf("%U", r))
		}
	}
	return bad
}

// TestPrintersEscapeControlCharacters: a network and a container whose
// names hold escape sequences and line breaks reach no terminal raw: ls,
// inspect and run --dry-run show them escaped, each on its own row, and
// the JSON of ls keeps the name exact with every control character
// escaped.
func TestPrintersEscapeControlCharacters(t *testing.T) {
	// The daemon knows the network too, and reports a problem with an
	// escape sequence in it.
	var status map[string][]map[string]any
	if err := json.Unmarshal(readFixture(t, "status.json"), &status); err != nil {
		t.Fatal(err)
	}
	evil := map[string]any{}
	for k, v := range status["networks"][0] {
		evil[k] = v
	}
	evil["id"], evil["endpoints"], evil["problems"] = strings.Repeat("e", 64), []any{}, []string{"blink\x1b[5m problem"}
	status["networks"] = append(status["networks"], evil)
	b, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	w := standardWorldWith(t, b)
	w.network(evilName, strings.Repeat("e", 64), "rdma-macvlan:latest", map[string]string{"parent": "ens3np0"}, map[string]any{
		"c3c3c3c3c3c3c3c3": map[string]any{"Name": "c\x1b[2Jx", "EndpointID": strings.Repeat("c", 64), "MacAddress": "02:42:c0:a8:07:09", "IPv4Address": "192.168.7.9/24"},
	})
	for _, tc := range []struct {
		name string
		args []string
		rc   int
		want []string // lines (or parts of one) the output must hold
	}{
		{"ls", []string{"ls"}, 0, []string{evilShown + "  rdma-macvlan:latest  ens3np0", evilShown + `: problem: blink\x1b[5m problem`}},
		// No RDMA device in this test's sysfs: doctor says it is blocked.
		{"doctor", []string{"doctor"}, 1, []string{"FAIL  network " + evilShown + "  blink\\x1b[5m problem"}},
		{"run --dry-run", []string{"run", "--dry-run", "--net", evilName, "img"}, 0, []string{"--net $'" + evilShown + "' img"}},
		{"inspect", []string{"inspect", evilName}, 0, []string{"network " + evilShown + " (eeeeeeeeeeee), driver rdma-macvlan:latest", `c\x1b[2Jx`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := w.run(tc.args...)
			out := w.stdout.String() + w.stderr.String()
			if rc != tc.rc {
				t.Fatalf("status %d, want %d:\n%s", rc, tc.rc, out)
			}
			if bad := rawControls(out); len(bad) > 0 {
				t.Errorf("raw control characters %q in:\n%s", bad, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("output does not hold %q:\n%s", want, out)
				}
			}
		})
	}
	t.Run("ls --format json", func(t *testing.T) {
		if rc := w.run("ls", "--format", "json"); rc != 0 {
			t.Fatalf("status %d: %s", rc, w.stderr.String())
		}
		if bad := rawControls(w.stdout.String()); len(bad) > 0 {
			t.Errorf("raw control characters %q in:\n%s", bad, w.stdout.String())
		}
		var out lsOutput
		if err := json.Unmarshal(w.stdout.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, n := range out.Networks {
			found = found || n.Name == evilName
		}
		if !found {
			t.Errorf("the JSON does not give the network's name exactly: %+v", out.Networks)
		}
	})
}

// TestShellQuoteControlCharacters: an argument with control characters
// is written in bash's $'...', which shows none of them raw and which bash
// reads back as the same bytes.
func TestShellQuoteControlCharacters(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to read the quoting back")
	}
	for _, a := range []string{evilName, "it's a \\ back\\x41slash\x1b", "bad\xffutf8\u2028", "plain", "with space"} {
		q := shellQuote(a)
		if bad := rawControls(q); len(bad) > 0 {
			t.Errorf("shellQuote(%q) = %q holds raw control characters", a, q)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != a {
			t.Errorf("bash reads shellQuote(%q) = %s back as %q (%v)", a, q, out, err)
		}
	}
}
