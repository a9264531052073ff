// Package escape makes text from outside docker rdma (the names of
// networks and containers, what the engine and the daemon say, an image's
// command) safe to print on a terminal or in a comment line: a string that
// holds only printable characters comes back as it is, any other character
// is written as its Go escape (\n, \x1b, \u009b, \u2028), so that it
// can neither move the cursor, change colours or the window title, nor
// start a new line.
package escape

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Controls returns s with every character that is not printable
// (strconv.IsPrint: control characters C0 and C1 and DEL, format
// characters such as the bidirectional overrides, line and paragraph
// separators, spaces other than ASCII's) written as its Go escape, and
// each byte that is not UTF-8 as \xNN. Printable text, backslashes
// included, is left as it is.
func Controls(s string) string {
	i := firstUnprintable(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// firstUnprintable returns the index of the first character of s that
// Controls escapes, -1 when there is none.
func firstUnprintable(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
		if !strconv.IsPrint(r) {
			return i
		}
	}
	return -1
}
