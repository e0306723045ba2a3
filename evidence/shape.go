package evidence

import (
	"strconv"
	"strings"
)

// NameShape is the shape of a specific name, the class a card counts its live names
// by (Tracker.LiveShapes): whether a later use of the name is likely turns on its
// shape far more than on its length. A plain word is written again by chance, a
// path or an identifier only when the agent reaches for it (docs/EVALUATION.md,
// "Live names by shape", gives the figures that made it a signal).
type NameShape uint8

// The shapes, in the order of Tracker.LiveShapes and cards.Card.LiveShapes; the
// first that applies is a name's shape.
const (
	ShapePlain  NameShape = iota // letters only (Plain): "daemon", "Firewall", "GitHub"
	ShapePhrase                  // a quoted phrase of several words: holds a space
	ShapePath                    // holds '/' or '\': "src/server.go", "/Users"
	ShapeDotted                  // holds '.': "server.go", "os.path", "1.2.3"
	ShapeDigits                  // holds a digit: "0x7f3a", "e2e", "404"
	ShapeCode                    // holds '_' or a capital: "read_file", "get-Foo"
	ShapeOther                   // anything else: "foo-bar", "a:b", "@scope"
)

// NumShapes is the number of NameShape values (the length of LiveShapes).
const NumShapes = 7

var shapeNames = [NumShapes]string{"plain", "phrase", "path", "dotted", "digits", "code", "other"}

// String returns the shape's name as features and reports spell it ("plain",
// "phrase", "path", "dotted", "digits", "code", "other"); "shape(N)" out of range.
func (s NameShape) String() string {
	if int(s) < NumShapes {
		return shapeNames[s]
	}
	return "shape(" + strconv.Itoa(int(s)) + ")"
}

// ShapeOf returns name's shape: the first of the NameShape constants, in order,
// whose rule it meets.
func ShapeOf(name string) NameShape {
	switch {
	case Plain(name):
		return ShapePlain
	case strings.IndexByte(name, ' ') >= 0:
		return ShapePhrase
	case strings.ContainsAny(name, `/\`):
		return ShapePath
	case strings.IndexByte(name, '.') >= 0:
		return ShapeDotted
	case strings.ContainsAny(name, "0123456789"):
		return ShapeDigits
	case strings.ContainsAny(name, "_ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
		return ShapeCode
	}
	return ShapeOther
}

// LiveShapes is an output's live names (Tracker.Live) counted by shape, indexed by
// NameShape; its sum is the live count.
type LiveShapes [NumShapes]int

// LiveShapes returns output key's live names by shape (their sum is Tracker.Live's
// live); zero for an unknown key. Kept up to date as names are carried and pinned,
// so the call is O(1).
func (t *Tracker) LiveShapes(key string) LiveShapes {
	var out LiveShapes
	if idx, ok := t.byKey[key]; ok {
		for i, n := range t.outs[idx].liveShape {
			out[i] = int(n)
		}
	}
	return out
}
