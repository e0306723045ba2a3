package ollama

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode/utf8"

	"github.com/invopop/jsonschema"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// Prompt versions. The version is the last part of Scorer.Name, so asks recorded
// under different prompts are never mixed; a change to a template or to the schema
// needs a new version.
const (
	// PromptV1 is prompt_v1.tmpl: cards without the use history.
	PromptV1 = "p1"
	// PromptV2 is prompt_v2.tmpl: every card also carries its `used` line, the use
	// history (docs/DESIGN.md step 4; cards.Card.UsedText), and the system message says
	// what it means.
	PromptV2 = "p2"
	// DefaultPrompt is the version a Scorer uses when Scorer.Prompt is "".
	DefaultPrompt = PromptV2
)

//go:embed prompt_v1.tmpl
var promptV1Text string

//go:embed prompt_v2.tmpl
var promptV2Text string

var templates = map[string]*template.Template{
	PromptV1: parseTemplate("prompt_v1.tmpl", promptV1Text),
	PromptV2: parseTemplate("prompt_v2.tmpl", promptV2Text),
}

func parseTemplate(name, text string) *template.Template {
	return template.Must(template.New(name).Funcs(template.FuncMap{"join": strings.Join}).Parse(text))
}

// ParsePrompt returns the prompt version named by s: "v1" or "p1" is PromptV1,
// "v2" or "p2" is PromptV2, "" is DefaultPrompt. Other values: an error naming
// the accepted ones.
func ParsePrompt(s string) (string, error) {
	switch s {
	case "":
		return DefaultPrompt, nil
	case "v1", PromptV1:
		return PromptV1, nil
	case "v2", PromptV2:
		return PromptV2, nil
	}
	return "", fmt.Errorf("prompt %q: want v1 or v2", s)
}

// ParseName splits a scorer name made by Scorer.Name ("ollama:MODEL:PROMPT", the
// model may hold colons, e.g. "ollama:qwen2.5:0.5b:p2") into its model and prompt
// version. ok is false for any other name or an unknown prompt version.
func ParseName(name string) (model, prompt string, ok bool) {
	rest, found := strings.CutPrefix(name, "ollama:")
	i := strings.LastIndexByte(rest, ':')
	if !found || i <= 0 {
		return "", "", false
	}
	model, prompt = rest[:i], rest[i+1:]
	if _, known := templates[prompt]; !known {
		return "", "", false
	}
	return model, prompt, true
}

// Prompt is one rendered request: the system and user messages, the card keys in
// order, and the format schema.
type Prompt struct {
	Version string // PromptV1 or PromptV2
	System  string
	User    string
	Keys    []string        // "c1".."cN", card i has key Keys[i]
	Format  json.RawMessage // the JSON schema sent as `format`
}

// RenderPrompt renders the request for all of b's cards with prompt v1
// (PromptV1), as a Scorer with Prompt "p1" sends it when they fit in one request.
// replay's request-size estimate still calls it; (*Scorer).Render renders with
// the scorer's own prompt version and (*Scorer).RequestTokens counts it.
func RenderPrompt(b cards.Batch) (Prompt, error) {
	return (&Scorer{Prompt: PromptV1}).render(b, b.Cards)
}

// Render renders the request for all of b's cards as Score would send it when
// they fit in one request, with the scorer's prompt version (Scorer.Prompt).
// Errors: an unknown prompt version.
func (s *Scorer) Render(b cards.Batch) (Prompt, error) {
	return s.render(b, b.Cards)
}

// cardText renders card c under key as prompt version v shows it: cards.Card.Text,
// and for PromptV2 a last line "used: " + UsedText().
func cardText(v string, c cards.Card, key string) string {
	t := c.Text(key)
	if v == PromptV1 {
		return t
	}
	return t + "used: " + c.UsedText() + "\n"
}

func (s *Scorer) render(b cards.Batch, cs []cards.Card) (Prompt, error) {
	v := s.prompt()
	tmpl, ok := templates[v]
	if !ok {
		return Prompt{}, fmt.Errorf("ollama: unknown prompt version %q (want %s or %s)", v, PromptV1, PromptV2)
	}
	keys := Keys(len(cs))
	texts := make([]string, len(cs))
	for i, c := range cs {
		texts[i] = cardText(v, c, keys[i])
	}
	data := struct {
		Task, Now string
		Cards     []string
		Keys      []string
	}{cmpOr(strings.TrimSpace(b.Task), "(none)"), cmpOr(strings.TrimSpace(b.Now), "(none)"), texts, keys}
	var sys, user bytes.Buffer
	if err := tmpl.ExecuteTemplate(&sys, "system", data); err != nil {
		return Prompt{}, fmt.Errorf("rendering %s system prompt: %w", v, err)
	}
	if err := tmpl.ExecuteTemplate(&user, "user", data); err != nil {
		return Prompt{}, fmt.Errorf("rendering %s user prompt: %w", v, err)
	}
	format, err := Format(keys)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Version: v, System: sys.String(), User: user.String(), Keys: keys, Format: format}, nil
}

// Keys returns the request ids of n cards: "c1".."cN".
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i+1)
	}
	return keys
}

// percent is reflected once to get the schema of one card's value; the tags are
// the single source of its range.
type percent struct {
	Keep int `json:"keep" jsonschema:"minimum=0,maximum=100"`
}

// percentSchema is {"type":"integer","minimum":0,"maximum":100}. OLLAMA-WIRE.md:
// integer bounds are enforced by Ollama's grammar, number bounds are not.
var percentSchema = func() *jsonschema.Schema {
	r := jsonschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	p, ok := r.Reflect(&percent{}).Properties.Get("keep")
	if !ok {
		panic("ollama: reflecting percent gave no keep property")
	}
	return p
}()

// Format returns the `format` JSON schema for the given keys: an object with one
// required integer 0-100 property per key and no other properties, e.g. for two
// cards {"properties":{"c1":{"type":"integer","minimum":0,"maximum":100},"c2":{…}},
// "additionalProperties":false,"type":"object","required":["c1","c2"]}. An object
// with required keys forces exactly one value per card; an array of {id, keep}
// lets ids repeat or go missing (OLLAMA-WIRE.md).
func Format(keys []string) (json.RawMessage, error) {
	props := jsonschema.NewProperties()
	for _, k := range keys {
		props.Set(k, percentSchema)
	}
	schema := &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		Required:             append([]string(nil), keys...),
		AdditionalProperties: jsonschema.FalseSchema,
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("marshalling the answer schema: %w", err)
	}
	return raw, nil
}

// SlotWhitespaceTokens is the room AnswerTokens leaves for whitespace at each place
// the grammar allows it. Ollama 0.17.4 turns the schema into a llama.cpp grammar
// (llama/llama.cpp/common/json-schema-to-grammar.cpp) whose rule `space ::= "" |
// " " | "\n"{1,2} [ \t]{0,20}` follows "{", every key, every ":", every value,
// every "," and the closing "}": 4n+1 places for n cards, each up to 22
// characters. A weak model pads them (OLLAMA-WIRE.md: `{"c1"\n\t\t\t:43 ,"c2":\n\n\t
// 66 , ... 54}\n\t\t `); complete answers seen there took 13-23 tokens per card,
// i.e. up to about 4 tokens a place besides the JSON itself. 5 a place (30 per
// card with the JSON) is above the most seen; filling all 22 characters of every
// place would need 88 per card and crowd the cards out of num_ctx.
const SlotWhitespaceTokens = 5

// AnswerTokens returns the automatic num_predict for a request with keys: the
// characters of the longest compact answer the schema allows (`{"c1":100,...}`,
// one token per character at most: for ASCII no tokenizer needs more, and
// qwen2.5's splits digits) plus SlotWhitespaceTokens for each of the 4n+1 places
// the grammar allows whitespace. For 20 cards: 192 + 5·81 = 597 tokens (the
// formula before was 32 + 16·20 = 352, which a padded 20-card answer filled).
func AnswerTokens(keys []string) int {
	if len(keys) == 0 {
		return 0
	}
	chars := 2 + len(keys) - 1 // the braces and the commas
	for _, k := range keys {
		chars += utf8.RuneCountInString(strconv.Quote(k)) + len(":100")
	}
	return chars + SlotWhitespaceTokens*(4*len(keys)+1)
}

// RequestTokens returns the o200k_base tokens of the request Score would send
// for all of b's cards in one piece, with the scorer's prompt version: the system
// and user messages plus TemplateTokens for the chat template. It leaves out the
// answer (num_predict) and the model's own tokenizer's difference (TokenMargin).
//
// It is counted by part, so that asking it at every ask of a replay stays cheap:
// FrameTokens (the prompt without its cards) plus CardTokens of every card. On
// real sessions it is within 1% of the exact count of the rendered prompt
// (TestRequestTokens). 0 for an unknown prompt version.
func (s *Scorer) RequestTokens(b cards.Batch) int {
	total := s.FrameTokens(b)
	for i, c := range b.Cards {
		total += s.CardTokens(c, i)
	}
	return total
}

// FrameTokens returns the tokens of b's request outside its cards, with the
// scorer's prompt version: the system message, the task, now and the prompt's
// fixed words, and TemplateTokens; 0 for an unknown prompt version. With
// CardTokens it makes *Scorer a replay.RequestSizer.
func (s *Scorer) FrameTokens(b cards.Batch) int {
	frame, err := s.render(cards.Batch{Task: b.Task, Now: b.Now}, nil)
	if err != nil {
		return 0
	}
	return promptTokens(frame)
}

// CardTokens returns the tokens card c adds to a request as its i-th card, with
// the scorer's prompt version: its text (with the used line under p2) and blank
// line, counted as at age 0 and key c1 and remembered by content (a re-ask of the
// same output differs only in its age's digits, and a key's digits, one token up
// to 999 under o200k), plus KeyListTokens for its id in the closing list; 0 for
// an unknown prompt version.
func (s *Scorer) CardTokens(c cards.Card, _ int) int {
	v := s.prompt()
	if _, ok := templates[v]; !ok {
		return 0
	}
	return cardTokens(v, c) + KeyListTokens
}

// KeyListTokens is what one more card adds to the closing list of ids
// ("Give the percentage for each of: c1, c2, …"): ", c12" is three o200k tokens.
const KeyListTokens = 3

// cardTokenCache remembers cardTokens by prompt version and card content (age 0);
// it is cleared when it reaches cardTokenEntries, about 2 MB.
var cardTokenCache = struct {
	sync.Mutex
	m map[uint64]int
}{m: map[uint64]int{}}

const cardTokenEntries = 1 << 16

var cardTokenSeed = maphash.MakeSeed()

// cardTokens is the o200k count of card c's text under prompt version v as the
// user message holds it (with its blank line), at age 0 and key c1.
func cardTokens(v string, c cards.Card) int {
	c.Age = 0
	text := cardText(v, c, "c1") + "\n"
	h := maphash.String(cardTokenSeed, v+"\x00"+text)
	cardTokenCache.Lock()
	n, ok := cardTokenCache.m[h]
	cardTokenCache.Unlock()
	if ok {
		return n
	}
	n = tokencount.Count(text)
	cardTokenCache.Lock()
	if len(cardTokenCache.m) >= cardTokenEntries {
		clear(cardTokenCache.m)
	}
	cardTokenCache.m[h] = n
	cardTokenCache.Unlock()
	return n
}

// promptTokens is the o200k_base count of p's messages plus TemplateTokens.
func promptTokens(p Prompt) int {
	return tokencount.Count(p.System) + tokencount.Count(p.User) + TemplateTokens
}

// estimate returns the tokens a request needs in num_ctx: the prompt (its o200k
// count times TokenMargin, TemplateTokens included) and the answer cap.
func (s *Scorer) estimate(p Prompt) int {
	return int(math.Ceil(float64(promptTokens(p))*TokenMargin)) + s.numPredict(p.Keys)
}

func (s *Scorer) fits(p Prompt) bool { return s.estimate(p) <= s.numCtx() }

// Fits reports whether a request with all of b's cards fits NumCtx by the
// estimate, and the tokens it is estimated to need: ceil(TokenMargin · (o200k
// tokens of the system and user messages + TemplateTokens)) + num_predict. The
// server may still refuse it (its tokenizer can need more; see Score).
func (s *Scorer) Fits(b cards.Batch) (bool, int, error) {
	p, err := s.render(b, b.Cards)
	if err != nil {
		return false, 0, err
	}
	return s.fits(p), s.estimate(p), nil
}
