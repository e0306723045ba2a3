package jsonscan

import "encoding/json"

// Head is what a format detector can learn from the start of a JSON document (or of
// one JSONL line), which may be cut anywhere and may be broken: the members and
// elements that are complete and valid, up to the first that is not.
type Head struct {
	Object, Array bool // the root is an object, an array (neither: something else)

	Items []json.RawMessage // root array: its complete leading elements

	Keys  map[string]bool              // root object: every key read in full (its value may be cut)
	Order []string                     // root object: those keys in order, repeats included
	Vals  map[string]json.RawMessage   // root object: complete values that are not arrays (the last, for a repeated key)
	Elems map[string][]json.RawMessage // root object: complete leading elements of array values
	// Cut is the key whose value did not end or was not valid JSON, where the scan
	// stopped; "" when it stopped elsewhere or not at all.
	Cut string

	// Complete: the root value ended inside the head; End is the index after it.
	Complete bool
	End      int
}

// ScanHead reads the first JSON value of head (leading blanks skipped) as far as it
// is complete and valid. Every value it keeps is valid JSON (checked with
// json.Valid), so it can be decoded with this package's functions.
func ScanHead(head []byte) Head {
	var h Head
	i := SkipSpace(head, 0)
	if i >= len(head) {
		return h
	}
	switch head[i] {
	case '[':
		h.Array = true
		h.Items, h.End, h.Complete = leading(head, i)
	case '{':
		h.Object = true
		h.Keys = map[string]bool{}
		h.Vals = map[string]json.RawMessage{}
		h.Elems = map[string][]json.RawMessage{}
		h.End, h.Complete = h.members(head, i)
	}
	return h
}

// leading returns the complete, valid elements of the array that opens at data[i],
// up to where data ends or breaks; done when the array closed, end the index after it.
func leading(data []byte, i int) (items []json.RawMessage, end int, done bool) {
	end, done = walkArray(data, i, func(vs int) (int, bool) {
		ve, ok := validValue(data, vs)
		if ok {
			items = append(items, data[vs:ve:ve])
		}
		return ve, ok
	})
	return items, end, done
}

// validValue returns the end of the value at data[i]; ok is false when it does not
// end inside data or is not valid JSON.
func validValue(data []byte, i int) (end int, ok bool) {
	e := SkipValue(data, i)
	return e, e >= 0 && json.Valid(data[i:e])
}

// members fills h from the object that opens at data[i]. A key counts as seen as soon
// as it is read; the scan stops at the first key or value that is cut or broken.
func (h *Head) members(data []byte, i int) (end int, done bool) {
	var k string
	key := func(ks Span) bool {
		if !json.Valid(data[ks.Start:ks.End]) {
			return false
		}
		k, _ = String(data[ks.Start:ks.End])
		h.Keys[k] = true
		h.Order = append(h.Order, k)
		return true
	}
	value := func(vs int) (int, bool) {
		if vs < len(data) && data[vs] == '[' {
			items, e, ok := leading(data, vs)
			h.Elems[k] = items
			if !ok {
				h.Cut = k
			}
			return e, ok
		}
		e, ok := validValue(data, vs)
		if !ok {
			h.Cut = k
			return 0, false
		}
		h.Vals[k] = data[vs:e:e]
		return e, true
	}
	return walkObject(data, i, key, value)
}
