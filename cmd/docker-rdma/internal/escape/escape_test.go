package escape

import (
	"strings"
	"testing"
)

func TestControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"roce", "roce"},
		{"", ""},
		{`a\b "c" ü 网络 �`, `a\b "c" ü 网络 �`},
		{"x\n    privileged: true", `x\n    privileged: true`},
		{"evil\x1b]0;owned\x07", `evil\x1b]0;owned\a`},
		{"\x1b[2J\r\t\x00\x7f", `\x1b[2J\r\t\x00\x7f`},
		{"c1\u009b31m\u0085", `c1\u009b31m\u0085`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"bidi\u202eevil\u2066", `bidi\u202eevil\u2066`},
		{"nbsp\u00a0", `nbsp\u00a0`},
		{"bad\xff\xc2utf8", `bad\xff\xc2utf8`},
	} {
		got := Controls(tc.in)
		if got != tc.want {
			t.Errorf("Controls(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, r := range got {
			if r < 0x20 || r >= 0x7f && r < 0xa0 || r == '\u2028' || r == '\u2029' {
				t.Errorf("Controls(%q) = %q keeps %U", tc.in, got, r)
			}
		}
		if strings.ContainsAny(got, "\n\r\x1b") {
			t.Errorf("Controls(%q) = %q", tc.in, got)
		}
	}
}
