// Package daemonjson edits dockerd's daemon.json for docker rdma runtime:
// it sets or removes the few members it is asked to and keeps every other
// byte of the file (key order, spacing, the other runtimes) as it was. A
// map round trip through encoding/json would sort the keys and re-indent
// the whole file.
package daemonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// member is one "key": value of an object, by its offsets in the document.
type member struct {
	key              string
	keyStart, keyEnd int // the key's quotes: doc[keyStart:keyEnd] is "key"
	valStart, valEnd int
}

// object is a JSON object of the document, by its offsets.
type object struct {
	open, close int // offsets of '{' and '}'
	members     []member
}

// find returns the index of the last member called key (the one
// encoding/json, and so dockerd, takes), -1 when there is none.
func (o object) find(key string) int {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return i
		}
	}
	return -1
}

// SyntaxError is a config file that is not valid JSON.
type SyntaxError struct {
	Offset      int64 // byte offset of the error
	Line, Col   int
	Err         error
	NotAnObject bool
}

func (e *SyntaxError) Error() string {
	if e.NotAnObject {
		return "not a JSON object"
	}
	return fmt.Sprintf("invalid JSON at byte %d (line %d, column %d): %v", e.Offset, e.Line, e.Col, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// check refuses a document that is not one valid JSON object.
func check(doc []byte) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		var se *json.SyntaxError
		off := int64(len(doc))
		if errors.As(err, &se) {
			off = se.Offset
		}
		line, col := position(doc, off)
		return &SyntaxError{Offset: off, Line: line, Col: col, Err: err}
	}
	if _, ok := v.(map[string]any); !ok {
		return &SyntaxError{NotAnObject: true}
	}
	return nil
}

// position turns a byte offset into a 1-based line and column.
func position(doc []byte, off int64) (line, col int) {
	if off > int64(len(doc)) {
		off = int64(len(doc))
	}
	before := doc[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col == 0 {
		col = 1
	}
	return line, col
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && isSpace(doc[i]) {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at doc[i] ('"').
func skipString(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the offset after the value starting at doc[i]. The
// document is valid JSON (check).
func skipValue(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				i = skipString(doc, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(doc) && !isSpace(doc[i]) && !strings.ContainsRune(",}]", rune(doc[i])) {
		i++
	}
	return i
}

// parseObject reads the object starting at doc[i] ('{').
func parseObject(doc []byte, i int) (object, error) {
	if i >= len(doc) || doc[i] != '{' {
		return object{}, errors.New("not a JSON object")
	}
	o := object{open: i}
	i = skipSpace(doc, i+1)
	for i < len(doc) && doc[i] != '}' {
		if doc[i] == ',' {
			i = skipSpace(doc, i+1)
			continue
		}
		m := member{keyStart: i, keyEnd: skipString(doc, i)}
		if err := json.Unmarshal(doc[m.keyStart:m.keyEnd], &m.key); err != nil {
			return object{}, fmt.Errorf("key at byte %d: %w", i, err)
		}
		i = skipSpace(doc, m.keyEnd)
		i = skipSpace(doc, i+1) // ':'
		m.valStart, m.valEnd = i, skipValue(doc, i)
		o.members = append(o.members, m)
		i = skipSpace(doc, m.valEnd)
	}
	o.close = i
	return o, nil
}

// top returns the document's top-level object.
func top(doc []byte) (object, error) {
	return parseObject(doc, skipSpace(doc, 0))
}

// layout is how a document is written, so that what is added looks like
// what is there.
type layout struct {
	pretty bool   // members on lines of their own
	unit   string // one level of indentation
}

// layoutOf guesses the layout from the top-level object: its first
// member's indentation is one level. A document without a newline inside
// it is compact.
func layoutOf(doc []byte, o object) layout {
	if len(o.members) == 0 {
		return layout{pretty: true, unit: "  "}
	}
	if !bytes.Contains(doc[o.open:o.close], []byte("\n")) {
		return layout{}
	}
	ind := indentOf(doc, o.members[0].keyStart)
	if ind == "" {
		ind = "  "
	}
	return layout{pretty: true, unit: ind}
}

// indentOf returns the white space between the start of the line and
// doc[i].
func indentOf(doc []byte, i int) string {
	j := i
	for j > 0 && (doc[j-1] == ' ' || doc[j-1] == '\t') {
		j--
	}
	return string(doc[j:i])
}

// render writes the JSON value raw as a member's value in an object whose
// members are indented by ind.
func (l layout) render(raw []byte, ind string) []byte {
	var b bytes.Buffer
	if l.pretty {
		_ = json.Indent(&b, raw, ind, l.unit)
	} else {
		_ = json.Compact(&b, raw)
	}
	return b.Bytes()
}

// setMember sets key of object o to the JSON value raw: in place of the
// last member of that name, else added after the last member (or into an
// empty object on lines of its own). outer is the indentation of the line
// holding o's opening brace.
func setMember(doc []byte, o object, key string, raw []byte, l layout, outer string) []byte {
	if i := o.find(key); i >= 0 {
		m := o.members[i]
		ind := indentOf(doc, m.keyStart)
		return splice(doc, m.valStart, m.valEnd, l.render(raw, ind))
	}
	k, _ := json.Marshal(key)
	if n := len(o.members); n > 0 {
		last := o.members[n-1]
		// The separator and colon of the members there.
		sep := append([]byte{','}, doc[o.open+1:o.members[0].keyStart]...)
		if n > 1 {
			sep = doc[o.members[n-2].valEnd:last.keyStart]
		}
		colon := doc[last.keyEnd:last.valStart]
		ind := indentOf(doc, last.keyStart)
		add := append(append(append(append([]byte{}, sep...), k...), colon...), l.render(raw, ind)...)
		return splice(doc, last.valEnd, last.valEnd, add)
	}
	if !l.pretty {
		add := append(append(k, ':'), l.render(raw, "")...)
		return splice(doc, o.open+1, o.close, add)
	}
	ind := outer + l.unit
	add := append(append(append([]byte("\n"+ind), k...), ": "...), l.render(raw, ind)...)
	add = append(add, "\n"+outer...)
	return splice(doc, o.open+1, o.close, add)
}

// removeMember removes the last member called key of object o: with the
// separator before it, so that it undoes setMember's add.
func removeMember(doc []byte, o object, key string) []byte {
	i := o.find(key)
	switch {
	case i < 0:
		return doc
	case i > 0:
		return splice(doc, o.members[i-1].valEnd, o.members[i].valEnd, nil)
	case len(o.members) > 1:
		return splice(doc, o.members[0].keyStart, o.members[1].keyStart, nil)
	}
	return splice(doc, o.open+1, o.close, nil)
}

func splice(doc []byte, from, to int, with []byte) []byte {
	out := make([]byte, 0, len(doc)-(to-from)+len(with))
	out = append(append(append(out, doc[:from]...), with...), doc[to:]...)
	return out
}

// lookup returns the value at path (keys of nested objects), false when a
// key on the way is missing. A value on the way that is not an object is
// an error naming its dotted path.
func lookup(doc []byte, path []string) (raw []byte, found bool, err error) {
	o, err := top(doc)
	if err != nil {
		return nil, false, err
	}
	for n, key := range path {
		i := o.find(key)
		if i < 0 {
			return nil, false, nil
		}
		m := o.members[i]
		if n == len(path)-1 {
			return doc[m.valStart:m.valEnd], true, nil
		}
		if doc[m.valStart] != '{' {
			return nil, false, fmt.Errorf("%s is not a JSON object", strings.Join(path[:n+1], "."))
		}
		if o, err = parseObject(doc, m.valStart); err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// objectAt returns the object holding the last key of path and the
// indentation of the line its opening brace is on; the objects on the
// way must exist.
func objectAt(doc []byte, path []string) (object, string, error) {
	o, err := top(doc)
	if err != nil {
		return object{}, "", err
	}
	outer := ""
	for n, key := range path[:len(path)-1] {
		i := o.find(key)
		if i < 0 || doc[o.members[i].valStart] != '{' {
			return object{}, "", fmt.Errorf("%s is not a JSON object", strings.Join(path[:n+1], "."))
		}
		outer = indentOf(doc, o.members[i].keyStart)
		if o, err = parseObject(doc, o.members[i].valStart); err != nil {
			return object{}, "", err
		}
	}
	return o, outer, nil
}

// set sets the value at path to raw; the objects on the way must exist.
func set(doc []byte, path []string, raw []byte) ([]byte, error) {
	t, err := top(doc)
	if err != nil {
		return nil, err
	}
	o, outer, err := objectAt(doc, path)
	if err != nil {
		return nil, err
	}
	return setMember(doc, o, path[len(path)-1], raw, layoutOf(doc, t), outer), nil
}

// remove removes the member at path, when it is there.
func remove(doc []byte, path []string) ([]byte, error) {
	o, _, err := objectAt(doc, path)
	if err != nil {
		return nil, err
	}
	return removeMember(doc, o, path[len(path)-1]), nil
}

// sameJSON reports whether two JSON values are equal as values (key order
// and spacing aside).
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// compact returns raw without insignificant white space.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return append(json.RawMessage{}, raw...)
	}
	return b.Bytes()
}
