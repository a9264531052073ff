package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
)

// maxNesting is how deeply arrays and objects may nest in a request. The
// deepest request Docker sends nests 4 levels (CreateEndpoint's port
// mappings: the request, its Options, the list, one mapping); 32 leaves room
// for whatever a newer engine adds and still bounds what the decoders below
// (and encoding/json) keep per level.
const maxNesting = 32

// errTooDeep refuses a request nested deeper than maxNesting.
var errTooDeep = &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: JSON nested more than %d levels deep (arrays and objects inside each other): Docker's requests nest a few levels; send the request as the plugin protocol encodes it", maxNesting)}

// checkNesting refuses body when its arrays and objects nest deeper than
// max. It only counts brackets outside strings, allocates nothing and runs
// before any decoding, so a deeply nested body costs one pass over its
// bytes. Malformed JSON is left to the decoder.
func checkNesting(body []byte, max int) error {
	depth := 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > max {
				return errTooDeep
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// checkFields enforces what encoding/json lets through: Docker's plugin
// client (moby's remote driver api package) encodes each request from a Go
// struct, so every field name appears once and spelled exactly as the
// field. A key that differs from a field only in case, or a key given
// twice in one object, is refused rather than matched loosely or resolved
// to its last value. Keys the request type does not have are ignored, as
// encoding/json does: newer engines may send more. A body nested deeper than
// maxNesting is refused before anything is decoded.
func checkFields(body []byte, t reflect.Type) error {
	if err := checkNesting(body, maxNesting); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := walker{dec: dec}
	if err := w.value(t); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// errMalformed stops the walk at JSON that does not parse: json.Unmarshal
// then says what is wrong with it.
var errMalformed = errors.New("malformed JSON")

// walker reads one request's JSON tokens. path holds where the value being
// read sits (its keys, and the arrays it is in); it is turned into text only
// for an error, so walking costs nothing per level but the slice.
type walker struct {
	dec  *json.Decoder
	path []step
}

// step is one level of a walker's path: a member of an object (key) or an
// element of an array.
type step struct {
	key  string
	elem bool
}

// where is the path of key in the object being read, as error messages
// show it: NetworkID, Interface.Address, IPv4Data[].Pool.
func (w *walker) where(key string) string {
	var b strings.Builder
	for _, s := range append(w.path, step{key: key}) {
		switch {
		case s.elem:
			b.WriteString("[]")
		case b.Len() > 0:
			b.WriteString(".")
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// value reads one JSON value, checking the keys of the objects that decode
// into structs and maps of t (nil: nothing to check). Its depth is bounded
// by checkNesting.
func (w *walker) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errMalformed
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.path = append(w.path, step{elem: true})
		for w.dec.More() {
			if err := w.value(elem); err != nil {
				return err
			}
		}
		w.path = w.path[:len(w.path)-1]
		if _, err := w.dec.Token(); err != nil {
			return errMalformed
		}
		return nil
	case '{':
		seen := map[string]bool{}
		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := tok.(string)
			if seen[key] {
				return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: field %s is given more than once: give it once", abbreviate([]byte(w.where(key))))}
			}
			seen[key] = true
			var sub reflect.Type
			switch {
			case t == nil || t.Kind() == reflect.Interface:
			case t.Kind() == reflect.Struct:
				f, exact := fieldOf(t, key)
				if f != nil && !exact {
					return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: field %s is spelled %s in the plugin protocol", abbreviate([]byte(w.where(key))), w.where(jsonName(*f)))}
				}
				if f != nil {
					sub = f.Type
				}
			case t.Kind() == reflect.Map:
				sub = t.Elem()
			}
			if sub == nil || sub == rawMessage || sub.Kind() == reflect.Interface {
				// Not a field (ignored), or kept raw and decoded later by
				// its own rules (options keep their duplicates to refuse
				// them by name).
				var skip json.RawMessage
				if err := w.dec.Decode(&skip); err != nil {
					return errMalformed
				}
				continue
			}
			w.path = append(w.path, step{key: key})
			if err := w.value(sub); err != nil {
				return err
			}
			w.path = w.path[:len(w.path)-1]
		}
		if _, err := w.dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// fieldOf finds the field of struct t that JSON key name decodes into:
// exact is false when only a case-insensitive match exists.
func fieldOf(t reflect.Type, name string) (f *reflect.StructField, exact bool) {
	var fold *reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		n := jsonName(sf)
		if n == "-" {
			continue
		}
		if n == name {
			return &sf, true
		}
		if fold == nil && strings.EqualFold(n, name) {
			fold = &sf
		}
	}
	return fold, false
}

func jsonName(f reflect.StructField) string {
	if tag, ok := f.Tag.Lookup("json"); ok {
		if n, _, _ := strings.Cut(tag, ","); n != "" {
			return n
		}
	}
	return f.Name
}
