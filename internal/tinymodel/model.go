// Package tinymodel writes a tiny random-weight language model as a GGUF file that
// a real Ollama server loads, and the Modelfile that `ollama create` imports it
// with. It exists to run the real-server tests and benchmarks (docs/SCORERS.md
// "A tiny model for a real Ollama server") where no model weights can be
// downloaded: the model answers nonsense, but through the whole of Ollama's path
// (model load, ChatML template, tokenizer, grammar-constrained sampling from the
// `format` schema, the runner's limits), so the figures measure the server and the
// client, not a model's judgement.
//
// The architecture is Qwen2's (the default scorer model, qwen2.5:0.5b, is one),
// with a few layers of a small width, tied input and output embeddings as
// Qwen2.5-0.5B has, and a vocabulary that is a prefix of o200k_base (O200kPrefix).
// Weights are float32, drawn from N(0, 0.02²) (GPT-2's initializer range) by a
// seeded PCG, norms 1: the same Config gives the same bytes.
package tinymodel

import (
	"fmt"
	"io"
	"math/rand/v2"
)

// Config shapes the model. The zero value of a field means its default.
type Config struct {
	Seed     uint64  // PCG seed of the weights; default 1
	Layers   int     // transformer blocks; default 2
	Embed    int     // embedding width; default 64
	FFN      int     // feed-forward width; default 128
	Heads    int     // attention heads; default 4 (head width Embed/Heads)
	KVHeads  int     // key/value heads (grouped-query attention); default 2
	Vocab    int     // o200k_base tokens kept (O200kPrefix); default 16384
	Context  int     // the model's context length in tokens; default 32768, Qwen2.5's
	RopeBase float32 // RoPE frequency base; default 1,000,000, Qwen2.5's
	Name     string  // general.name; default "pruneadvisor-tiny"
}

// Defaults of Config (see its fields).
const (
	DefaultSeed     = 1
	DefaultLayers   = 2
	DefaultEmbed    = 64
	DefaultFFN      = 128
	DefaultHeads    = 4
	DefaultKVHeads  = 2
	DefaultVocab    = 16384
	DefaultContext  = 32768
	DefaultRopeBase = 1e6
	DefaultName     = "pruneadvisor-tiny"
	// InitStd is the weights' standard deviation (GPT-2's initializer_range).
	InitStd = 0.02
	// RMSEpsilon is the norms' epsilon (Qwen2.5's rms_norm_eps).
	RMSEpsilon = 1e-6
)

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// withDefaults fills zero fields and checks the shapes.
func (c Config) withDefaults() (Config, error) {
	c.Seed = or(c.Seed, DefaultSeed)
	c.Layers = or(c.Layers, DefaultLayers)
	c.Embed = or(c.Embed, DefaultEmbed)
	c.FFN = or(c.FFN, DefaultFFN)
	c.Heads = or(c.Heads, DefaultHeads)
	c.KVHeads = or(c.KVHeads, DefaultKVHeads)
	c.Vocab = or(c.Vocab, DefaultVocab)
	c.Context = or(c.Context, DefaultContext)
	c.RopeBase = or(c.RopeBase, DefaultRopeBase)
	c.Name = or(c.Name, DefaultName)
	switch {
	case c.Layers < 0 || c.Embed < 0 || c.FFN < 0 || c.Heads < 0 || c.KVHeads < 0 || c.Context < 0:
		return c, fmt.Errorf("negative shape in %+v", c)
	case c.Embed%c.Heads != 0:
		return c, fmt.Errorf("embedding width %d is not a multiple of %d heads", c.Embed, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return c, fmt.Errorf("%d heads are not a multiple of %d key/value heads", c.Heads, c.KVHeads)
	case (c.Embed/c.Heads)%2 != 0:
		return c, fmt.Errorf("head width %d is odd (RoPE rotates pairs)", c.Embed/c.Heads)
	}
	return c, nil
}

// Write writes the model for c as GGUF to w. Errors: a bad Config (negative
// shapes, heads that do not divide the width or each other), the vocabulary's
// (O200kPrefix) or the writer's.
func Write(w io.Writer, c Config) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	v, err := O200kPrefix(c.Vocab)
	if err != nil {
		return err
	}
	return WriteGGUF(w, metadata(c, v), tensors(c, len(v.Tokens)))
}

// metadata returns the GGUF keys llama.cpp's qwen2 loader and Ollama read
// (llama.cpp src/llama-arch.cpp key names).
func metadata(c Config, v Vocab) []KV {
	eot, end := v.ID(Specials[0]), v.ID(Specials[2])
	return []KV{
		{"general.architecture", "qwen2"},
		{"general.name", c.Name},
		{"general.file_type", uint32(0)}, // LLAMA_FTYPE_ALL_F32
		{"qwen2.block_count", uint32(c.Layers)},
		{"qwen2.context_length", uint32(c.Context)},
		{"qwen2.embedding_length", uint32(c.Embed)},
		{"qwen2.feed_forward_length", uint32(c.FFN)},
		{"qwen2.attention.head_count", uint32(c.Heads)},
		{"qwen2.attention.head_count_kv", uint32(c.KVHeads)},
		{"qwen2.attention.layer_norm_rms_epsilon", float32(RMSEpsilon)},
		{"qwen2.rope.freq_base", c.RopeBase},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "gpt-4o"}, // o200k's pre-split (llama.cpp LLAMA_VOCAB_PRE_TYPE_GPT4O)
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.merges", v.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(eot)},
		{"tokenizer.ggml.eos_token_id", uint32(end)},
		{"tokenizer.ggml.padding_token_id", uint32(eot)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", ChatTemplateJinja},
	}
}

// tensors returns the weights in llama.cpp's qwen2 layout (src/llama-model.cpp,
// LLM_ARCH_QWEN2), output tied to token_embd.
func tensors(c Config, vocab int) []Tensor {
	rng := rand.New(rand.NewPCG(c.Seed, 0))
	e, kv, ff := uint64(c.Embed), uint64(c.Embed/c.Heads*c.KVHeads), uint64(c.FFN)
	normal := func(name string, shape ...uint64) Tensor {
		t := Tensor{Name: name, Shape: shape, Data: make([]float32, product(shape))}
		for i := range t.Data {
			t.Data[i] = float32(rng.NormFloat64() * InitStd)
		}
		return t
	}
	ones := func(name string, n uint64) Tensor {
		t := Tensor{Name: name, Shape: []uint64{n}, Data: make([]float32, n)}
		for i := range t.Data {
			t.Data[i] = 1
		}
		return t
	}
	ts := []Tensor{normal("token_embd.weight", e, uint64(vocab))}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			ones(p+"attn_norm.weight", e),
			normal(p+"attn_q.weight", e, e), normal(p+"attn_q.bias", e),
			normal(p+"attn_k.weight", e, kv), normal(p+"attn_k.bias", kv),
			normal(p+"attn_v.weight", e, kv), normal(p+"attn_v.bias", kv),
			normal(p+"attn_output.weight", e, e),
			ones(p+"ffn_norm.weight", e),
			normal(p+"ffn_gate.weight", e, ff), normal(p+"ffn_up.weight", e, ff),
			normal(p+"ffn_down.weight", ff, e),
		)
	}
	return append(ts, ones("output_norm.weight", e))
}

func product(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// ChatTemplateJinja is the ChatML template stored as tokenizer.chat_template (for
// tools that read it; Ollama uses the Modelfile's TEMPLATE).
const ChatTemplateJinja = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

// Template is the Modelfile TEMPLATE: ChatML, each message wrapped in
// <|im_start|>role ... <|im_end|>, then the assistant's turn opened (Qwen2.5's
// template without its tool section).
const Template = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`

// Modelfile returns the Modelfile that imports the GGUF file at ggufPath (a path
// relative to the Modelfile's folder, or absolute): FROM, TEMPLATE and a stop at
// <|im_end|>.
func Modelfile(ggufPath string) string {
	return fmt.Sprintf("FROM %s\nTEMPLATE \"\"\"%s\"\"\"\nPARAMETER stop \"<|im_end|>\"\n", ggufPath, Template)
}
