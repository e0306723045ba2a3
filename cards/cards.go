// Package cards builds the compact summary of one candidate tool output that a scorer
// sees (docs/DESIGN.md step 4): id, tool and argument summary, the first 300 and last 100
// characters, age in steps, and the agent's reaction, plus once per batch the task and
// the agent's latest words ("now").
package cards

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Card sizes in characters (runes), from docs/DESIGN.md's defaults table: "enough to
// recognise an output, small enough to batch".
const (
	HeadChars     = 300 // characters kept from the start of the output
	TailChars     = 100 // characters kept from the end of the output
	ReactionChars = 200 // characters kept of the agent's reaction
	ContextChars  = 600 // characters kept of the batch's task and of now, each
)

// Card is the summary of one candidate. Field values are already cut to size; the
// same output at the same age always yields the same Card and the same Text bytes.
type Card struct {
	ID   string `json:"id"`   // the output's key within its session (ToolOutput.Key)
	Tool string `json:"tool"` // tool name as the agent called it
	Args string `json:"args"` // argument summary: path, command or pattern
	// Head is the first HeadChars characters; for outputs no longer than
	// HeadChars+TailChars it is the whole text and Tail is empty.
	Head string `json:"head"`
	Tail string `json:"tail,omitempty"` // the last TailChars characters
	// Chars is the output's full length in characters, so the scorer knows how much
	// lies between head and tail.
	Chars int `json:"chars"`
	Age   int `json:"age"` // steps since the output (current step minus the output's step)
	// Reaction is the agent's first words after seeing the output; with no words, its
	// next tool call ("next call: Tool summary"); "" when the session ends there.
	Reaction string `json:"reaction,omitempty"`
	// SharedReaction marks a reaction that follows several parallel outputs at once,
	// so it need not be about this one.
	SharedReaction bool `json:"shared_reaction,omitempty"`
	IsError        bool `json:"is_error,omitempty"` // the call failed
	// Uses is the output's use history at the card's step (docs/DESIGN.md step 4, "used"):
	// how many of the agent's messages so far named a distinctive name of the output,
	// re-read its file or re-ran its call (the later-use definition applied to the
	// past). 0 means never.
	Uses int `json:"uses"`
	// LastUseAgo is the number of steps since the latest of those uses (the card's
	// step minus the use's step); 0 when Uses is 0.
	LastUseAgo int `json:"last_use_ago,omitempty"`

	// Facts the advisor adds for the fitted scorer (not shown in prompts).

	// Tokens is the output's size in o200k_base tokens.
	Tokens int `json:"tokens"`
	// Action is the call's normalised kind (toolcall.Action: read, edit, write,
	// search, shell, other); "" for an output without a call.
	Action string `json:"action,omitempty"`
	// EditedSince reports a successful edit or write, after the output, of a file the
	// output's call read (so the output may show stale content).
	EditedSince bool `json:"edited_since,omitempty"`
	// NamedByTask and NamedByNow report that the task, or the agent's latest words,
	// name the output's file (its path or base name) or its command.
	NamedByTask bool `json:"named_by_task,omitempty"`
	NamedByNow  bool `json:"named_by_now,omitempty"`
	// Lexical is the card's BM25 match against task and now as a keep-probability
	// (advisor/lexical.CardKeep: batch-independent); -1 when task and now hold no
	// terms.
	Lexical float64 `json:"lexical"`
	// Step is the step the card was built for (the session's length so far, in steps).
	Step int `json:"step"`
	// Names is how many distinct names the output was the first to hold (the names
	// whose later use counts as its use).
	Names int `json:"names"`
	// Live is how many specific names the output still carries for a later use
	// (evidence.Tracker.Live: their latest carrier, not written by the agent or the
	// user since; each name serves one use at most), with those of the outputs its
	// call made dead by a rule (a read superseded by it: the label credits their
	// later uses to it); LiveUndigested those of them its stub's digest would not
	// hold.
	Live           int `json:"live"`
	LiveUndigested int `json:"live_undigested"`
	// LiveShapes is Live counted by the names' shapes, in evidence.NameShape order
	// (plain word, quoted phrase, path, dotted, digits, code identifier, other;
	// evidence.Tracker.LiveShapes): its sum is Live.
	LiveShapes [7]int `json:"live_shapes"`
	// PathIdle is the steps since the latest call that touched (read, edited, wrote,
	// ran a command naming) one of the output's files, its own call included; the
	// card's age for an output without a file.
	PathIdle int `json:"path_idle"`
	// PathReads is how many successful reads of the output's files the session has
	// made so far, its own included; 0 without a file.
	PathReads int `json:"path_reads"`
	// Runs is how many calls with the same tool and arguments had been made when the
	// output came, its own included (a command run again and again).
	Runs int `json:"runs"`
	// RecentUses counts its uses in the last 10 steps.
	RecentUses int `json:"recent_uses"`
	// SessionUseRate is the session's counting uses so far per output so far: how
	// much this agent comes back to its outputs.
	SessionUseRate float64 `json:"session_use_rate"`
	// OutputsSince is how many tool outputs came after it (its recency rank among
	// outputs, 0 for the newest); TokensAfter the tokens of the messages after its
	// own, nothing pruned (how deep in the context it sits).
	OutputsSince int `json:"outputs_since"`
	TokensAfter  int `json:"tokens_after"`
}

// Signals are the facts of one card at one step that a fitted model reads
// (advisor/fitted's feature table): everything on the card but its text. They are
// recorded with every ask, so `pruneadvisor fit` learns from exactly what the
// advisor knew when it asked.
type Signals struct {
	Step           int     `json:"step"`
	Age            int     `json:"age"`
	Tokens         int     `json:"tokens"`
	Chars          int     `json:"chars"`
	Action         string  `json:"action,omitempty"`
	IsError        bool    `json:"is_error,omitempty"`
	Uses           int     `json:"uses"`
	LastUseAgo     int     `json:"last_use_ago,omitempty"`
	EditedSince    bool    `json:"edited_since,omitempty"`
	NamedByTask    bool    `json:"named_by_task,omitempty"`
	NamedByNow     bool    `json:"named_by_now,omitempty"`
	Lexical        float64 `json:"lexical"`
	HasReaction    bool    `json:"has_reaction,omitempty"`
	SharedReaction bool    `json:"shared_reaction,omitempty"`
	Names          int     `json:"names"`
	Live           int     `json:"live"`
	LiveUndigested int     `json:"live_undigested"`
	LiveShapes     [7]int  `json:"live_shapes"`
	PathIdle       int     `json:"path_idle"`
	PathReads      int     `json:"path_reads"`
	Runs           int     `json:"runs"`
	RecentUses     int     `json:"recent_uses"`
	SessionUseRate float64 `json:"session_use_rate"`
	OutputsSince   int     `json:"outputs_since"`
	TokensAfter    int     `json:"tokens_after"`
}

// Signals returns the card's signals.
func (c Card) Signals() Signals {
	return Signals{
		Step: c.Step, Age: c.Age, Tokens: c.Tokens, Chars: c.Chars, Action: c.Action, IsError: c.IsError,
		Uses: c.Uses, LastUseAgo: c.LastUseAgo, EditedSince: c.EditedSince,
		NamedByTask: c.NamedByTask, NamedByNow: c.NamedByNow, Lexical: c.Lexical,
		HasReaction: c.Reaction != "", SharedReaction: c.SharedReaction,
		Names: c.Names, Live: c.Live, LiveUndigested: c.LiveUndigested, LiveShapes: c.LiveShapes, PathIdle: c.PathIdle, PathReads: c.PathReads,
		Runs: c.Runs, RecentUses: c.RecentUses, SessionUseRate: c.SessionUseRate,
		OutputsSince: c.OutputsSince, TokensAfter: c.TokensAfter,
	}
}

// UsedText renders the use history as prompt template v2 shows it: "never",
// "once, 3 steps ago", or "4 times, last 2 steps ago".
func (c Card) UsedText() string {
	switch {
	case c.Uses <= 0:
		return "never"
	case c.Uses == 1:
		return fmt.Sprintf("once, %d steps ago", c.LastUseAgo)
	default:
		return fmt.Sprintf("%d times, last %d steps ago", c.Uses, c.LastUseAgo)
	}
}

// Batch is one request's worth of cards with the context given once.
type Batch struct {
	Task  string // the user's request, cut to ContextChars
	Now   string // the agent's latest assistant text, cut to ContextChars
	Cards []Card
	// Corpus holds document frequencies over the session's tool outputs, for scorers
	// that weigh terms by rarity (the lexical scorer). May be nil.
	Corpus *Corpus
}

// Score is a scorer's answer for one card.
type Score struct {
	Keep float64 // keep-probability in [0,1]; meaningful only when OK
	OK   bool    // false means "no score": nothing may be pruned on its account
}

// New builds the card for output o as seen at step now (Age = now - o.Step), without
// its reaction: the advisor fills Reaction incrementally, from the first assistant
// message indexed after the output (ReactionOf). Build does both at once.
func New(o *transcript.ToolOutput, now int) Card {
	c := Card{ID: o.Key, Chars: utf8.RuneCountInString(o.Text), Age: now - o.Step, IsError: o.IsError}
	if o.Call != nil {
		c.Tool = o.Call.Name
		c.Args = o.Call.Summary
	}
	if utf8.ValidString(o.Text) {
		// HeadTail without its passes over the whole text: valid text is its own
		// ToValidUTF8, and its character count is Chars.
		c.Head, c.Tail = headTail(o.Text, c.Chars, HeadChars, TailChars)
	} else {
		c.Head, c.Tail = HeadTail(o.Text, HeadChars, TailChars)
	}
	return c
}

// Build builds the full card for output o at step now from msgs, the part of the
// session visible at that step (so a card never shows the future): New plus the
// reaction of the first assistant message after the output, marked shared when that
// message follows more than one output (parallel calls).
func Build(msgs []*transcript.Message, o *transcript.ToolOutput, now int) Card {
	c := New(o, now)
	outputs := 0
	for i := o.Message; i >= 0 && i < len(msgs); i-- {
		if msgs[i].Role == transcript.RoleAssistant {
			break
		}
		outputs += len(msgs[i].Outputs)
	}
	for i := o.Message + 1; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != transcript.RoleAssistant {
			outputs += len(m.Outputs)
			continue
		}
		c.Reaction = ReactionOf(m)
		c.SharedReaction = outputs > 1 && c.Reaction != ""
		break
	}
	return c
}

// ReactionOf returns the reaction an assistant message gives to the outputs before
// it: its first words (whitespace folded, cut to ReactionChars), or, with no words,
// its first tool call as "next call: Tool summary"; "" when it has neither.
func ReactionOf(m *transcript.Message) string {
	if t := foldWords(m.Text, ReactionChars); t != "" {
		return Cut(t, ReactionChars)
	}
	if len(m.Calls) > 0 {
		c := m.Calls[0]
		return Cut(fmt.Sprintf("next call: %s %s", c.Name, c.Summary), ReactionChars)
	}
	return ""
}

// HeadTail returns the first head and last tail characters of s, cut on rune
// boundaries (invalid UTF-8 bytes count as one character each and are replaced by
// U+FFFD so card bytes are valid UTF-8). When s has no more than head+tail characters
// it is returned whole as the head.
func HeadTail(s string, head, tail int) (string, string) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return headTail(s, utf8.RuneCountInString(s), head, tail)
}

// headTail is HeadTail of valid UTF-8 text s of n characters.
func headTail(s string, n, head, tail int) (string, string) {
	if n <= head+tail {
		return s, ""
	}
	return cutRunes(s, head), lastRunes(s, tail)
}

// foldWords returns strings.Join(strings.Fields(text), " ") or, when that is longer,
// a prefix of it with more than n characters (as Cut counts them), so that Cut(x, n)
// is the same for both: the words of a prefix of text that ends on a rune, whose
// join is a prefix of the whole join, grown until it has enough characters. An
// assistant text of many kilobytes is folded only as far as its reaction needs.
func foldWords(text string, n int) string {
	for k := max(4*(n+1), 64); ; k *= 2 {
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++ // every byte that starts a rune is where decoding text stops
		}
		k = min(k, len(text))
		if t := strings.Join(strings.Fields(text[:k]), " "); k == len(text) || cutEnd(t, n) >= 0 {
			return t
		}
	}
}

// Cut returns s cut to at most n characters on a rune boundary, with "…" appended
// when something was cut. Characters are those of strings.ToValidUTF8(s, "\uFFFD"):
// a rune, or a run of invalid bytes (one U+FFFD); only the first n+1 are read.
func Cut(s string, n int) string {
	if n < 1 {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		return cutRunes(s, n-1) + "…"
	}
	if end := cutEnd(s, n); end >= 0 {
		return strings.ToValidUTF8(s[:end], "\uFFFD") + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cutEnd returns, when s has more than n >= 1 characters (Cut's), the byte offset in
// s where its n-th character starts (the end of the first n-1), else -1.
func cutEnd(s string, n int) int {
	chars, end := 0, 0
	invalid := false // s[i-1] was an invalid byte: a run of them is one character
	for i := 0; i < len(s); {
		size, bad := 1, false
		if s[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(s[i:])
			bad = size == 1
		}
		if !bad || !invalid {
			if chars == n-1 {
				end = i
			}
			if chars++; chars > n {
				return end
			}
		}
		invalid = bad
		i += size
	}
	return -1
}

func cutRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

func lastRunes(s string, n int) string {
	i := len(s)
	for k := 0; k < n; k++ { // s has more than n characters (headTail); at i == 0 the decoder would return size 0
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// Text renders the card as the scorer's prompt shows it: one field a line, fixed
// order, so the same card always gives the same bytes. key is the short id the
// request uses for this card (for example "c3").
func (c Card) Text(key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s %s (age %d steps, %d chars", key, c.Tool, c.Args, c.Age, c.Chars)
	if c.IsError {
		b.WriteString(", failed")
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "head: %s\n", c.Head)
	if c.Tail != "" {
		fmt.Fprintf(&b, "tail: %s\n", c.Tail)
	}
	switch {
	case c.Reaction == "":
		b.WriteString("reaction: (none)\n")
	case c.SharedReaction:
		fmt.Fprintf(&b, "reaction (shared with parallel calls): %s\n", c.Reaction)
	default:
		fmt.Fprintf(&b, "reaction: %s\n", c.Reaction)
	}
	return b.String()
}
