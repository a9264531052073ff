package compose

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/escape"
)

// Header starts every override file.
const Header = "# Written by docker rdma compose: the services on rdma-macvlan networks run with the rdma-macvlan runtime.\n" +
	"# Use it after your own files: docker compose -f compose.yaml -f THIS_FILE up\n"

// Write writes the override as a Compose file. Every string is quoted and
// every $ doubled, so compose takes it as written (no interpolation); the
// names in comments have their control characters escaped, so none ends
// its comment line. What comes from a network, a container or the user's
// files can only be a value where the override puts it, never a key of
// its own.
func (ov *Override) Write(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString(Header)
	names := slices.Sorted(maps.Keys(ov.Services))
	if len(names) == 0 {
		b.WriteString("# No service is on an rdma-macvlan network.\n")
	}
	b.WriteString("services:")
	if len(names) == 0 {
		b.WriteString(" {}")
	}
	b.WriteString("\n")
	var soft, hard string
	if ov.Memlock != "" {
		var ok bool
		soft, hard, ok = strings.Cut(ov.Memlock, ":")
		if !ok || !isLimit(soft) || !isLimit(hard) {
			return fmt.Errorf("memlock %q is not SOFT:HARD in bytes (-1: unlimited)", ov.Memlock)
		}
	}
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:\n", quote(n))
		rails := make([]string, len(ov.Services[n]))
		for i, r := range ov.Services[n] {
			rails[i] = escape.Controls(r)
		}
		fmt.Fprintf(&b, "    # on %s\n", strings.Join(rails, ", "))
		fmt.Fprintf(&b, "    runtime: %s\n", quote(api.RuntimeName))
		if len(ov.Env) > 0 {
			b.WriteString("    environment:\n")
			for _, kv := range ov.Env {
				k, v, _ := strings.Cut(kv, "=")
				fmt.Fprintf(&b, "      %s: %s\n", quote(k), quote(v))
			}
		}
		if ov.Memlock != "" {
			fmt.Fprintf(&b, "    ulimits:\n      memlock:\n        soft: %s\n        hard: %s\n", soft, hard)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// isLimit reports whether s is a limit as runflags.ParseMemlock writes
// it: -1 or a number of bytes.
func isLimit(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= -1 && strconv.FormatInt(n, 10) == s
}

// quote writes s as a YAML double-quoted scalar, with $ doubled for
// compose's interpolation. strconv.Quote writes every character that is
// not printable as an escape, and each of its escapes (\n, \t, \a, \x1b,
// \u2028, \U000e0001, \", \\) is one of YAML's double-quoted style with
// the same meaning: no character of s can end the scalar or its line, or
// be one a YAML document may not hold (C0, DEL, C1). A byte that is not
// UTF-8 cannot be in a YAML document at all: it becomes U+FFFD.
func quote(s string) string {
	return strconv.Quote(strings.ToValidUTF8(strings.ReplaceAll(s, "$", "$$"), "\uFFFD"))
}
