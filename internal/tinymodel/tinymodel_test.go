package tinymodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/fs/ggml"
	"github.com/tiktoken-go/tokenizer"
)

// defaultSHA256 is the SHA-256 of Write's output for the zero Config, as
// docs/SCORERS.md records it for `go run ./cmd/tinymodel`. A change of the
// generator that changes the bytes must update both.
const defaultSHA256 = "ba9bb4fb31993a0e2857430139e914d30e78f18f40ebd22445b44ff0c6cf975a"

func write(t *testing.T, c Config) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOllamaDecodes reads the default model back with Ollama's own GGUF decoder
// (github.com/ollama/ollama/fs/ggml, what the server runs on `ollama create` and
// at load) and checks the keys the qwen2 loader needs and every tensor's shape.
func TestOllamaDecodes(t *testing.T) {
	data := write(t, Config{})
	f, err := ggml.Decode(bytes.NewReader(data), -1)
	if err != nil {
		t.Fatal(err)
	}
	kv := f.KV()
	if got := kv.Architecture(); got != "qwen2" {
		t.Errorf("architecture %q", got)
	}
	gotKV := map[string]any{
		"block_count": kv.BlockCount(), "embedding_length": kv.EmbeddingLength(), "context_length": kv.ContextLength(),
		"feed_forward_length": kv.Uint("feed_forward_length"), "head_count": kv.HeadCountMax(), "head_count_kv": kv.HeadCountKVMax(),
		"eps": kv.Float("attention.layer_norm_rms_epsilon"), "rope": kv.Float("rope.freq_base"),
		"tokenizer": kv.String("tokenizer.ggml.model"), "pre": kv.String("tokenizer.ggml.pre"),
		"tokens": len(kv.Strings("tokenizer.ggml.tokens")), "types": len(kv.Ints("tokenizer.ggml.token_type")),
		"eos": kv.Uint("tokenizer.ggml.eos_token_id"), "bos": kv.Uint("tokenizer.ggml.bos_token_id"),
		"add_bos": kv.Bool("tokenizer.ggml.add_bos_token", true),
	}
	wantKV := map[string]any{
		"block_count": uint64(2), "embedding_length": uint64(64), "context_length": uint64(32768),
		"feed_forward_length": uint32(128), "head_count": uint64(4), "head_count_kv": uint64(2),
		"eps": float32(1e-6), "rope": float32(1e6), "tokenizer": "gpt2", "pre": "gpt-4o",
		"tokens": 16387, "types": 16387, "eos": uint32(16386), "bos": uint32(16384), "add_bos": false,
	}
	if d := cmp.Diff(wantKV, gotKV); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	toks := kv.Strings("tokenizer.ggml.tokens")
	if d := cmp.Diff([]string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, toks[16384:]); d != "" {
		t.Errorf("special tokens (-want +got):\n%s", d)
	}
	// Ranks 0 and 256 of o200k_base are "!" and two spaces (GPT-2's byte map: the
	// space byte is U+0120).
	if toks[0] != "!" || toks[256] != "ĠĠ" {
		t.Errorf("tokens 0 and 256: %q, %q", toks[0], toks[256])
	}

	var gotShapes []string
	for _, ts := range f.Tensors().Items() {
		gotShapes = append(gotShapes, fmt.Sprintf("%s %v kind %d", ts.Name, ts.Shape, ts.Kind))
	}
	wantShapes := []string{"token_embd.weight [64 16387] kind 0"}
	for i := range 2 {
		p := fmt.Sprintf("blk.%d.", i)
		wantShapes = append(wantShapes,
			p+"attn_norm.weight [64] kind 0",
			p+"attn_q.weight [64 64] kind 0", p+"attn_q.bias [64] kind 0",
			p+"attn_k.weight [64 32] kind 0", p+"attn_k.bias [32] kind 0",
			p+"attn_v.weight [64 32] kind 0", p+"attn_v.bias [32] kind 0",
			p+"attn_output.weight [64 64] kind 0",
			p+"ffn_norm.weight [64] kind 0",
			p+"ffn_gate.weight [64 128] kind 0", p+"ffn_up.weight [64 128] kind 0",
			p+"ffn_down.weight [128 64] kind 0")
	}
	wantShapes = append(wantShapes, "output_norm.weight [64] kind 0")
	if d := cmp.Diff(wantShapes, gotShapes); d != "" {
		t.Errorf("tensors (-want +got):\n%s", d)
	}
	// The decoder walks the tensors by their sizes to the end of the file; the data
	// section is the last 4 bytes per parameter (every tensor here is a multiple
	// of 32 bytes, so no padding between them) and starts aligned.
	if int(f.Length) != len(data) {
		t.Errorf("decoder ended at %d of %d bytes", f.Length, len(data))
	}
	if start := len(data) - 4*defaultParams; start%Alignment != 0 || start <= 0 {
		t.Errorf("data section starts at %d: not a positive multiple of %d", start, Alignment)
	}
}

// defaultParams is the default model's parameter count: 64·16387 embedding
// values, per layer 64+64·64+64+2·(64·32+32)+64·64+64+3·64·128, and 64 for the
// output norm.
const defaultParams = 64*16387 + 2*(64+64*64+64+2*(64*32+32)+64*64+64+3*64*128) + 64

// TestWeights reads the tensors back from the bytes: norms are exactly 1, the
// random weights have mean about 0 and standard deviation about InitStd.
func TestWeights(t *testing.T) {
	data := write(t, Config{})
	f, err := ggml.Decode(bytes.NewReader(data), -1)
	if err != nil {
		t.Fatal(err)
	}
	start := uint64(len(data) - 4*defaultParams)
	values := func(ts *ggml.Tensor) []float32 {
		n := ts.Elements()
		out := make([]float32, n)
		for i := range out {
			off := start + ts.Offset + 4*uint64(i)
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		}
		return out
	}
	for _, ts := range f.Tensors().Items() {
		v := values(ts)
		if strings.HasSuffix(ts.Name, "norm.weight") {
			for i, x := range v {
				if x != 1 {
					t.Fatalf("%s[%d] = %v, want 1", ts.Name, i, x)
				}
			}
			continue
		}
		var sum, sq float64
		for _, x := range v {
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		n := float64(len(v))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		// The standard error of the mean is InitStd/√n; of the std, InitStd/√(2n).
		// Five of them, with the smallest tensors (32 biases) the loosest.
		if math.Abs(mean) > 5*InitStd/math.Sqrt(n) || math.Abs(std-InitStd) > 5*InitStd/math.Sqrt(2*n) {
			t.Errorf("%s: mean %.5f, std %.5f over %d values, want about 0 and %v", ts.Name, mean, std, len(v), InitStd)
		}
	}
}

// TestReproducible: the same Config gives the same bytes (the digest
// docs/SCORERS.md records), another seed other weights of the same size.
func TestReproducible(t *testing.T) {
	a, b := write(t, Config{}), write(t, Config{Seed: DefaultSeed})
	if got := fmt.Sprintf("%x", sha256.Sum256(a)); got != defaultSHA256 {
		t.Errorf("sha256 %s, want %s (docs/SCORERS.md records it)", got, defaultSHA256)
	}
	if !bytes.Equal(a, b) {
		t.Error("two writes of the default model differ")
	}
	c := write(t, Config{Seed: 2})
	if len(c) != len(a) || bytes.Equal(c, a) {
		t.Errorf("seed 2: %d bytes, equal %v; want %d bytes, different", len(c), bytes.Equal(c, a), len(a))
	}
}

// TestMergesRebuildTokens: BPE with the stored merges alone (rank = position in
// the list) turns the bytes of sample text's o200k tokens back into those tokens,
// so a server using the merges splits text as o200k does wherever o200k's tokens
// are in the prefix. tiktoken's encoder is the independent route.
func TestMergesRebuildTokens(t *testing.T) {
	v, err := O200kPrefix(DefaultVocab)
	if err != nil {
		t.Fatal(err)
	}
	rank := make(map[[2]string]int, len(v.Merges))
	for i, m := range v.Merges {
		l, r, _ := strings.Cut(m, " ")
		rank[[2]string{l, r}] = i
	}
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	enc := byteEncoder()
	text := "The server reads each request with the values it already has; func main() { return nil }"
	ids, pieces, err := codec.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, id := range ids {
		if id >= DefaultVocab {
			continue // a rarer token than the prefix keeps: the model needs more tokens there
		}
		checked++
		got := bpe(encodeBytes(enc, pieces[i]), rank)
		if want := v.Tokens[id]; len(got) != 1 || got[0] != want {
			t.Errorf("%q: BPE with the merges gives %q, want [%q]", pieces[i], got, want)
		}
	}
	if checked < len(ids)*3/4 {
		t.Errorf("only %d of %d tokens of the sample are in the prefix", checked, len(ids))
	}
	if len(v.Merges) < DefaultVocab-256 {
		t.Errorf("%d merges for %d multi-byte tokens", len(v.Merges), DefaultVocab-256)
	}
}

// bpe is GPT-2's merge loop over the runes of word: merge the adjacent pair of
// lowest rank until none is in the table.
func bpe(word string, rank map[[2]string]int) []string {
	var parts []string
	for _, r := range word {
		parts = append(parts, string(r))
	}
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := rank[[2]string{parts[i], parts[i+1]}]; ok && (at < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			return parts
		}
		parts[at] += parts[at+1]
		parts = append(parts[:at+1], parts[at+2:]...)
	}
}

// TestConfigErrors: shapes the architecture cannot have are refused, naming them.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Embed: 60, Heads: 8}, "embedding width 60 is not a multiple of 8 heads"},
		{Config{Heads: 4, KVHeads: 3}, "4 heads are not a multiple of 3 key/value heads"},
		{Config{Embed: 12, Heads: 4, KVHeads: 1}, "head width 3 is odd"},
		{Config{Vocab: 100}, "vocabulary size 100: want 256 to 199997"},
		{Config{Layers: -1}, "negative shape"},
	} {
		err := Write(&bytes.Buffer{}, tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}
