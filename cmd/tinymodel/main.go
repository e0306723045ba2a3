// Command tinymodel writes a tiny random-weight Qwen2-architecture model as GGUF
// (internal/tinymodel) and a Modelfile beside it, for running pruneadvisor against
// a real Ollama server where no weights can be downloaded (docs/SCORERS.md "A tiny
// model for a real Ollama server"):
//
//	go run ./cmd/tinymodel -out /tmp/tinymodel
//	ollama create pruneadvisor-tiny -f /tmp/tinymodel/Modelfile
//
// It prints the file's size and SHA-256; the same flags give the same bytes.
package main

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pruneadvisor/pruneadvisor/internal/tinymodel"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tinymodel", flag.ContinueOnError)
	out := fs.String("out", "", "folder to write tiny.gguf and Modelfile into (created if missing)")
	var c tinymodel.Config
	fs.Uint64Var(&c.Seed, "seed", tinymodel.DefaultSeed, "seed of the random weights")
	fs.IntVar(&c.Layers, "layers", tinymodel.DefaultLayers, "transformer blocks")
	fs.IntVar(&c.Embed, "embed", tinymodel.DefaultEmbed, "embedding width")
	fs.IntVar(&c.Vocab, "vocab", tinymodel.DefaultVocab, "o200k_base tokens kept in the vocabulary")
	fs.StringVar(&c.Name, "name", tinymodel.DefaultName, "general.name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	var buf bytes.Buffer
	if err := tinymodel.Write(&buf, c); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	gguf := filepath.Join(*out, "tiny.gguf")
	if err := os.WriteFile(gguf, buf.Bytes(), 0o644); err != nil {
		return err
	}
	mf := filepath.Join(*out, "Modelfile")
	if err := os.WriteFile(mf, []byte(tinymodel.Modelfile("./tiny.gguf")), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d bytes, sha256 %x\n%s\nimport it with: ollama create %s -f %s\n",
		gguf, buf.Len(), sha256.Sum256(buf.Bytes()), mf, c.Name, mf)
	return nil
}
