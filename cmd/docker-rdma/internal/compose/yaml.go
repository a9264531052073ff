package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

// Header starts every override file.
const Header = "# Written by docker rdma compose: what RDMA needs for the services on rdma-macvlan networks.\n" +
	"# Use it after your own files: docker compose -f compose.yaml -f THIS_FILE up\n"

// Write writes the override as a Compose file. Every string is quoted and
// every $ doubled, so compose takes it as written (no interpolation).
func (ov *Override) Write(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString(Header)
	names := make([]string, 0, len(ov.Services))
	for n := range ov.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		b.WriteString("# No service is on an rdma-macvlan network.\n")
	}
	b.WriteString("services:")
	if len(names) == 0 {
		b.WriteString(" {}")
	}
	b.WriteString("\n")
	for _, n := range names {
		so := ov.Services[n]
		fmt.Fprintf(&b, "  %s:\n", quote(n))
		fmt.Fprintf(&b, "    # on %s\n", strings.Join(so.Rails, ", "))
		list(&b, "devices", so.Devices)
		list(&b, "cap_add", so.CapAdd)
		if so.Memlock != "" {
			soft, hard, _ := strings.Cut(so.Memlock, ":")
			fmt.Fprintf(&b, "    ulimits:\n      memlock:\n        soft: %s\n        hard: %s\n", soft, hard)
		}
		if so.Helper != "" {
			fmt.Fprintf(&b, "    volumes:\n      - type: bind\n        source: %s\n        target: %s\n        read_only: true\n",
				quote(so.Helper), quote(rdmaexec.ContainerPath))
		}
		list(&b, "entrypoint", so.Entrypoint)
		if so.Command != nil {
			list(&b, "command", so.Command)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func list(b *bytes.Buffer, key string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "    %s:\n", key)
	for _, it := range items {
		fmt.Fprintf(b, "      - %s\n", quote(it))
	}
}

// quote writes s as a YAML double-quoted scalar (JSON's string syntax is a
// subset of it), with $ doubled for compose's interpolation.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(strings.ReplaceAll(s, "$", "$$"))
	return strings.TrimSuffix(b.String(), "\n")
}
