package tinymodel

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// GGUF value types (ggml's gguf.h, enum gguf_type). Only those the model needs.
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

// ggmlTypeF32 is GGML_TYPE_F32 (ggml.h, enum ggml_type).
const ggmlTypeF32 = 0

// ggufVersion is the GGUF file format version written (gguf.h GGUF_VERSION).
const ggufVersion = 3

// Alignment is the byte alignment of the tensor data section and of each tensor
// in it: GGUF's default (gguf.h GGUF_DEFAULT_ALIGNMENT, 32), so the file does not
// need a general.alignment key.
const Alignment = 32

// KV is one metadata key and its value: uint32, int32, float32, bool, string,
// []string, []int32 or []float32.
type KV struct {
	Key   string
	Value any
}

// Tensor is one float32 tensor. Shape lists ggml's ne[0], ne[1], ...: the first
// dimension varies fastest (a weight of n_out rows of n_in is {n_in, n_out}).
// len(Data) is the product of Shape.
type Tensor struct {
	Name  string
	Shape []uint64
	Data  []float32
}

func (t Tensor) bytes() uint64 { return 4 * uint64(len(t.Data)) }

// padding returns the bytes that bring n to a multiple of Alignment.
func padding(n uint64) uint64 { return (Alignment - n%Alignment) % Alignment }

// WriteGGUF writes a GGUF version 3 file: header, the KVs in order, the tensor
// infos in order, then the tensor data, each tensor starting at a multiple of
// Alignment from the start of the data section (layout: ggml's docs/gguf.md).
// Errors: a value of an unsupported type, a tensor whose data does not fill its
// shape, or the writer's.
func WriteGGUF(w io.Writer, kvs []KV, tensors []Tensor) error {
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.Shape {
			n *= d
		}
		if n != uint64(len(t.Data)) {
			return fmt.Errorf("tensor %s: shape %v holds %d values, data has %d", t.Name, t.Shape, n, len(t.Data))
		}
	}
	g := &ggufWriter{w: bufio.NewWriter(w)}
	g.raw([]byte("GGUF"))
	g.u32(ggufVersion)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		g.str(kv.Key)
		if err := g.value(kv.Value); err != nil {
			return fmt.Errorf("key %s: %w", kv.Key, err)
		}
	}
	var offset uint64
	for _, t := range tensors {
		g.str(t.Name)
		g.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			g.u64(d)
		}
		g.u32(ggmlTypeF32)
		g.u64(offset)
		offset += t.bytes() + padding(t.bytes())
	}
	g.raw(make([]byte, padding(g.n)))
	for _, t := range tensors {
		for _, f := range t.Data {
			g.u32(math.Float32bits(f))
		}
		g.raw(make([]byte, padding(t.bytes())))
	}
	if g.err != nil {
		return fmt.Errorf("writing gguf: %w", g.err)
	}
	if err := g.w.Flush(); err != nil {
		return fmt.Errorf("writing gguf: %w", err)
	}
	return nil
}

// ggufWriter writes little-endian values, keeping the first error and the count
// of bytes written.
type ggufWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (g *ggufWriter) raw(b []byte) {
	if g.err != nil {
		return
	}
	n, err := g.w.Write(b)
	g.n += uint64(n)
	g.err = err
}

func (g *ggufWriter) u32(v uint32) { g.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (g *ggufWriter) u64(v uint64) { g.raw(binary.LittleEndian.AppendUint64(nil, v)) }

// str writes a gguf_string: uint64 length, then the bytes (no terminator).
func (g *ggufWriter) str(s string) {
	g.u64(uint64(len(s)))
	g.raw([]byte(s))
}

// value writes the type tag and the value.
func (g *ggufWriter) value(v any) error {
	switch v := v.(type) {
	case uint32:
		g.u32(ggufUint32)
		g.u32(v)
	case int32:
		g.u32(ggufInt32)
		g.u32(uint32(v))
	case float32:
		g.u32(ggufFloat32)
		g.u32(math.Float32bits(v))
	case bool:
		g.u32(ggufBool)
		b := byte(0)
		if v {
			b = 1
		}
		g.raw([]byte{b})
	case string:
		g.u32(ggufString)
		g.str(v)
	case []string:
		g.array(ggufString, len(v))
		for _, s := range v {
			g.str(s)
		}
	case []int32:
		g.array(ggufInt32, len(v))
		for _, x := range v {
			g.u32(uint32(x))
		}
	case []float32:
		g.array(ggufFloat32, len(v))
		for _, x := range v {
			g.u32(math.Float32bits(x))
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

// array writes an array's header: the array tag, the element type, the count.
func (g *ggufWriter) array(elem uint32, n int) {
	g.u32(ggufArray)
	g.u32(elem)
	g.u64(uint64(n))
}
