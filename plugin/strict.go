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

// checkFields enforces what encoding/json lets through: Docker's plugin
// client (moby's remote driver api package) encodes each request from a Go
// struct, so every field name appears once and spelled exactly as the
// field. A key that differs from a field only in case, or a key given
// twice in one object, is refused rather than matched loosely or resolved
// to its last value. Keys the request type does not have are ignored, as
// encoding/json does: newer engines may send more.
func checkFields(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkValue(dec, t, ""); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// errMalformed stops the walk at JSON that does not parse: json.Unmarshal
// then says what is wrong with it.
var errMalformed = errors.New("malformed JSON")

// walkValue reads one JSON value from dec, checking the keys of the objects
// that decode into structs and maps of t (never nil here).
func walkValue(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
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
		for dec.More() {
			if err := walkValue(dec, elem, path+"[]"); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
		return nil
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return errMalformed
			}
			key, _ := tok.(string)
			where := member(path, key)
			if seen[key] {
				return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: field %s is given more than once: give it once", abbreviate([]byte(where)))}
			}
			seen[key] = true
			var sub reflect.Type
			switch {
			case t == nil || t.Kind() == reflect.Interface:
			case t.Kind() == reflect.Struct:
				f, exact := fieldOf(t, key)
				if f != nil && !exact {
					return &driver.BadRequestError{Msg: fmt.Sprintf("malformed request: field %s is spelled %s in the plugin protocol", abbreviate([]byte(where)), member(path, jsonName(*f)))}
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
				if err := dec.Decode(&skip); err != nil {
					return errMalformed
				}
				continue
			}
			if err := walkValue(dec, sub, where); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}

// member is the path of key in the object at path, as error messages show
// it: NetworkID, Interface.Address, IPv4Data[].Pool.
func member(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
