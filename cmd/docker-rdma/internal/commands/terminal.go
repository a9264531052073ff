package commands

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/escape"
)

// tprintf is fmt.Fprintf for what docker rdma prints for people: every
// string, error or Stringer among the arguments has its control characters
// escaped (escape.Controls), so that a name, a message of the engine or
// the daemon, or a container's environment can neither move the cursor,
// recolour the terminal or retitle its window, nor start a line or a
// table cell of its own. The format, docker rdma's own text, is written
// as it is. Every table and text printer of the commands writes through
// it (or tprintln).
func tprintf(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, format, printable(a)...)
}

// tprintln is fmt.Fprintln with tprintf's escaping.
func tprintln(w io.Writer, a ...any) {
	fmt.Fprintln(w, printable(a)...)
}

func printable(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch x := v.(type) {
		case string:
			out[i] = escape.Controls(x)
		case error:
			out[i] = escape.Controls(x.Error())
		case fmt.Stringer:
			out[i] = escape.Controls(x.String())
		default:
			out[i] = v
		}
	}
	return out
}

// escapeJSON writes, in JSON made by encoding/json, each character that
// is not printable as a \u escape: the encoder escapes C0 but writes DEL,
// C1 and format characters as they are. Outside strings the encoder
// writes only printable ASCII, spaces and newlines, so only characters of
// strings change, and to escapes that mean the same.
func escapeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == '\n' || strconv.IsPrint(r) || r == utf8.RuneError && n == 1 {
			out = append(out, b[:n]...)
		} else {
			for _, u := range utf16.Encode([]rune{r}) {
				out = fmt.Appendf(out, `\u%04x`, u)
			}
		}
		b = b[n:]
	}
	return out
}
