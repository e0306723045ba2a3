package shell

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/toolcall/internal/paths"
)

// This file holds the lexer and the interpreter (package doc in ops.go).
//
// The analysis is deliberately asymmetric. Claiming a file was read when its text is
// not in the output would let the rules kill a live read, so read ops are recorded only
// for commands that run unconditionally, on literal paths, with stdout reaching the
// output. Claiming an edit that did not happen is harmless (a later covering read then
// shows the same lines), so edit ops are recorded more freely.

// shTok is one lexical token of a shell command.
type shTok struct {
	op  string // operator text ("&&", "|", ">", "<<", "\n", …); "" for a word
	val string // the word with quotes and escapes removed
	lit bool   // the word has no expansion ($, `, globs, ~): val is what the shell passes
	fd  string // for redirections, an explicit fd prefix ("2" in 2>)
	// heredoc body for "<<" and "<<-", with bodyLit reporting a quoted delimiter
	body    string
	bodyLit bool
	hasBody bool
}

func (t shTok) isWord() bool { return t.op == "" }

type shLexer struct {
	s       string
	i       int
	toks    []shTok
	pending []int // indexes of heredoc redirections waiting for their body
	delims  []heredocDelim
}

type heredocDelim struct {
	word   string
	strip  bool // <<- strips leading tabs
	quoted bool
}

// lexShell splits s into tokens. It reports false when s uses syntax it cannot follow
// (an unterminated quote or substitution), in which case callers treat the command as
// opaque.
func lexShell(s string) ([]shTok, bool) {
	l := &shLexer{s: s}
	for {
		ok, done := l.next()
		if !ok {
			return nil, false
		}
		if done {
			break
		}
	}
	// A heredoc whose body never came (the command ends on its line) gets an empty body.
	for _, k := range l.pending {
		l.toks[k].hasBody = true
	}
	return l.toks, true
}

// next lexes one token; done reports the end of input.
func (l *shLexer) next() (ok, done bool) {
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		if c == ' ' || c == '\t' || c == '\r' {
			l.i++
			continue
		}
		if c == '\\' && l.i+1 < len(s) && s[l.i+1] == '\n' {
			l.i += 2
			continue
		}
		break
	}
	if l.i >= len(s) {
		return true, true
	}
	c := s[l.i]
	switch {
	case c == '#':
		for l.i < len(s) && s[l.i] != '\n' {
			l.i++
		}
		return true, false
	case c == '\n':
		l.i++
		l.toks = append(l.toks, shTok{op: "\n"})
		l.readHeredocs()
		return true, false
	}
	if strings.HasPrefix(s[l.i:], "<(") || strings.HasPrefix(s[l.i:], ">(") {
		// process substitution: its commands feed another command, not the output
		n, ok := skipExpansion("$" + s[l.i+1:])
		if !ok {
			return false, false
		}
		l.toks = append(l.toks, shTok{val: s[l.i : l.i+n], lit: false})
		l.i += n
		return true, false
	}
	for _, op := range []string{"&&", "||", ";;", "|&", "&>>", "&>", ";", "|", "&", "(", ")", ">>", ">|", ">&", ">", "<<<", "<<-", "<<", "<&", "<>", "<"} {
		if strings.HasPrefix(s[l.i:], op) {
			l.i += len(op)
			return l.operator(op, "")
		}
	}
	// fd-prefixed redirection: 2>, 2>>, 1>&2, 0<
	j := l.i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j > l.i && j < len(s) && (s[j] == '>' || s[j] == '<') {
		fd := s[l.i:j]
		l.i = j
		for _, op := range []string{">>", ">|", ">&", ">", "<<<", "<<-", "<<", "<&", "<>", "<"} {
			if strings.HasPrefix(s[l.i:], op) {
				l.i += len(op)
				return l.operator(op, fd)
			}
		}
	}
	w, lit, quoted, ok := l.word()
	if !ok {
		return false, false
	}
	l.toks = append(l.toks, shTok{val: w, lit: lit})
	if n := len(l.toks); n >= 2 && (l.toks[n-2].op == "<<" || l.toks[n-2].op == "<<-") {
		// the word just read is a heredoc delimiter
		l.toks = l.toks[:n-1]
		k := n - 2
		l.pending = append(l.pending, k)
		l.delims = append(l.delims, heredocDelim{word: w, strip: l.toks[k].op == "<<-", quoted: quoted})
		l.toks[k].bodyLit = quoted
	}
	return true, false
}

func (l *shLexer) operator(op, fd string) (ok, done bool) {
	l.toks = append(l.toks, shTok{op: op, fd: fd})
	return true, false
}

// readHeredocs consumes the bodies of the heredocs opened on the line just ended.
func (l *shLexer) readHeredocs() {
	for n, k := range l.pending {
		d := l.delims[n]
		var body strings.Builder
		for l.i < len(l.s) {
			end := strings.IndexByte(l.s[l.i:], '\n')
			var line string
			if end < 0 {
				line = l.s[l.i:]
				l.i = len(l.s)
			} else {
				line = l.s[l.i : l.i+end]
				l.i += end + 1
			}
			if d.strip {
				line = strings.TrimLeft(line, "\t")
			}
			if strings.TrimRight(line, "\r") == d.word {
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		l.toks[k].body = body.String()
		l.toks[k].hasBody = true
	}
	l.pending, l.delims = nil, nil
}

// expansion copies the $… or `…` expansion at l.i to b, as written; false when it
// does not end.
func (l *shLexer) expansion(b *strings.Builder) bool {
	n, ok := skipExpansion(l.s[l.i:])
	if !ok {
		return false
	}
	b.WriteString(l.s[l.i : l.i+n])
	l.i += n
	return true
}

// word lexes one word. lit is false when the word holds an expansion or a glob;
// quoted reports any quoting (which makes a heredoc delimiter literal).
func (l *shLexer) word() (w string, lit, quoted, ok bool) {
	s := l.s
	var b strings.Builder
	lit = true
	start := l.i
	// A Windows drive path written without quotes keeps its backslashes: the agent
	// meant the path, whatever bash would do to it.
	winPath := l.i+2 < len(s) && isLetter(s[l.i]) && s[l.i+1] == ':' && s[l.i+2] == '\\'
	for l.i < len(s) {
		c := s[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' || c == '>':
			if l.i == start {
				return "", false, false, false
			}
			return b.String(), lit, quoted, true
		case c == '\\' && winPath:
			b.WriteByte(c)
			l.i++
		case c == '\\':
			quoted = true
			if l.i+1 < len(s) {
				if s[l.i+1] != '\n' {
					b.WriteByte(s[l.i+1])
				}
				l.i += 2
			} else {
				l.i++
			}
		case c == '\'':
			quoted = true
			end := strings.IndexByte(s[l.i+1:], '\'')
			if end < 0 {
				return "", false, false, false
			}
			b.WriteString(s[l.i+1 : l.i+1+end])
			l.i += end + 2
		case c == '$' && l.i+1 < len(s) && s[l.i+1] == '\'':
			quoted = true
			v, n, ok := ansiC(s[l.i+2:])
			if !ok {
				return "", false, false, false
			}
			b.WriteString(v)
			l.i += 2 + n
		case c == '"':
			quoted = true
			l.i++
			closed := false
			for l.i < len(s) && !closed {
				d := s[l.i]
				switch {
				case d == '"':
					closed = true
					l.i++
				case d == '\\' && l.i+1 < len(s):
					e := s[l.i+1]
					if e == '$' || e == '`' || e == '"' || e == '\\' {
						b.WriteByte(e)
					} else if e != '\n' {
						b.WriteByte('\\')
						b.WriteByte(e)
					}
					l.i += 2
				case d == '$' || d == '`':
					lit = false
					if !l.expansion(&b) {
						return "", false, false, false
					}
				default:
					b.WriteByte(d)
					l.i++
				}
			}
			if !closed {
				return "", false, false, false
			}
		case c == '$' || c == '`':
			lit = false
			if !l.expansion(&b) {
				return "", false, false, false
			}
		default:
			// * and ? glob; [ is taken literally, as bash does when nothing matches
			// (redacted transcripts write paths like /Users/[USER]/…)
			if c == '*' || c == '?' || c == '{' {
				lit = false
			}
			b.WriteByte(c)
			l.i++
		}
	}
	return b.String(), lit, quoted, true
}

// ansiC decodes the body of a $'…' string (s starts after the opening quote) and
// returns the value and how many bytes it used, closing quote included.
func ansiC(s string) (string, int, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' {
			return b.String(), i + 1, true
		}
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(c)
	}
	return "", 0, false
}

// skipExpansion returns the length of the expansion at the start of s: $name, ${…},
// $(…), $((…)) or `…`. Parentheses are matched with quotes taken into account.
func skipExpansion(s string) (int, bool) {
	if s[0] == '`' {
		for i := 1; i < len(s); i++ {
			if s[i] == '\\' {
				i++
				continue
			}
			if s[i] == '`' {
				return i + 1, true
			}
		}
		return 0, false
	}
	if len(s) < 2 {
		return 1, true
	}
	switch s[1] {
	case '{':
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return 0, false
		}
		return end + 1, true
	case '(':
		depth := 0
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '(':
				depth++
			case ')':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			case '\\':
				i++
			case '\'':
				end := strings.IndexByte(s[i+1:], '\'')
				if end < 0 {
					return 0, false
				}
				i += end + 1
			case '"':
				j := i + 1
				for j < len(s) && s[j] != '"' {
					if s[j] == '\\' {
						j++
					}
					j++
				}
				if j >= len(s) {
					return 0, false
				}
				i = j
			}
		}
		return 0, false
	}
	i := 1
	for i < len(s) && (isLetter(s[i]) || s[i] == '_' || (s[i] >= '0' && s[i] <= '9')) {
		i++
	}
	if i == 1 && strings.ContainsRune("@*#?$!-0123456789", rune(s[1])) {
		i = 2
	}
	return i, true
}

// Result is what the analysis of one command line found.
type Result struct {
	// Ops lists each file access in the order the command line performs it.
	Ops []Op
	// Other: the line ran something that is neither a reader, a search, an editor nor
	// harmless (echo, cd, true, …).
	Other bool
	// Search: the line ran a search or listing (grep, rg, find, ls, …).
	Search bool
	// Unsure: a read could not be attributed (an expansion, an unknown directory, a
	// command that may not run).
	Unsure bool
	// Writes counts the write ops with known content.
	Writes int
}

// shellAnalyzer interprets the tokens of one command line.
type shellAnalyzer struct {
	res   *Result
	dir   string // directory relative paths resolve against; "" when unknown
	known bool   // dir is known (false after `cd $X`)
	depth int    // nesting of if/while/for bodies: commands there may not run
	abort bool   // syntax the analysis does not follow (case, functions) was met
	dirs  []dirState
}

type dirState struct {
	dir   string
	known bool
}

// Analyze analyses the command line cmd run in directory dir, against which relative
// paths resolve ("" leaves them relative; paths are normalised as toolcall's
// NormalizePath does). A line it cannot lex (an unterminated quote or substitution)
// gives Result{Other: true}.
func Analyze(cmd, dir string) Result {
	res := Result{}
	a := &shellAnalyzer{res: &res, dir: dir, known: true}
	if !a.run(cmd) {
		return Result{Other: true}
	}
	return res
}

// run lexes and interprets cmd; false when the command could not be lexed.
func (a *shellAnalyzer) run(cmd string) bool {
	toks, ok := lexShell(cmd)
	if !ok {
		return false
	}
	// An and-or list (pipelines joined by && and ||) is interpreted when it ends. The
	// pipelines before its first || run unless an earlier one failed (and then the
	// exit status says so, unless a || masks it: cd x && cat f || echo no is taken to
	// read f); the pipelines after a || may not run at all.
	type entry struct {
		cmds    []*simpleCmd
		afterOr bool
	}
	var list []entry
	hasOr := false
	var pipe []*simpleCmd
	cur := &simpleCmd{}
	endPipe := func() {
		if len(cur.words) > 0 || len(cur.redirs) > 0 {
			pipe = append(pipe, cur)
		}
		cur = &simpleCmd{}
	}
	endList := func() {
		for _, e := range list {
			a.pipeline(e.cmds, e.afterOr)
		}
		list, hasOr = nil, false
	}
	flush := func(connector string) {
		endPipe()
		if connector == "|" || connector == "|&" {
			return
		}
		if len(pipe) > 0 {
			list = append(list, entry{cmds: pipe, afterOr: hasOr})
		}
		pipe = nil
		switch connector {
		case "||":
			hasOr = true
		case "&&":
		default:
			endList()
		}
	}
	for k := 0; k < len(toks); k++ {
		t := toks[k]
		switch t.op {
		case "":
			cur.words = append(cur.words, t)
		case "\n":
			if k > 0 && (toks[k-1].op == "|" || toks[k-1].op == "|&" || toks[k-1].op == "&&" || toks[k-1].op == "||") {
				continue // the list or pipeline goes on on the next line
			}
			flush(t.op)
		case "&&", "||", ";", "&", "|", "|&", ";;":
			flush(t.op)
		case "(":
			flush(";")
			a.dirs = append(a.dirs, dirState{a.dir, a.known})
		case ")":
			flush(";")
			if n := len(a.dirs); n > 0 {
				a.dir, a.known = a.dirs[n-1].dir, a.dirs[n-1].known
				a.dirs = a.dirs[:n-1]
			}
		default: // redirection
			r := redirect{op: t.op, fd: t.fd, body: t.body, bodyLit: t.bodyLit, heredoc: t.hasBody}
			if !t.hasBody && k+1 < len(toks) && toks[k+1].isWord() {
				r.target = toks[k+1]
				k++
			}
			cur.redirs = append(cur.redirs, r)
		}
	}
	flush(";")
	return true
}

// simpleCmd is one command of a pipeline.
type simpleCmd struct {
	words  []shTok
	redirs []redirect
}

type redirect struct {
	op      string
	fd      string
	target  shTok
	body    string
	bodyLit bool
	heredoc bool
}

// args returns the command words as strings.
func (c *simpleCmd) args() []string {
	out := make([]string, len(c.words))
	for i, w := range c.words {
		out[i] = w.val
	}
	return out
}

// stdin returns the heredoc or here-string body fed to the command, and whether the
// body is literal.
func (c *simpleCmd) stdin() (body string, lit, ok bool) {
	for _, r := range c.redirs {
		if r.heredoc {
			if r.bodyLit {
				return r.body, true, true
			}
			return r.body, !strings.ContainsAny(r.body, "$`\\"), true
		}
		if r.op == "<<<" {
			return r.target.val + "\n", r.target.lit, true
		}
	}
	return "", false, false
}

// keywords that open and close compound commands.
var (
	condOpeners = map[string]bool{"if": true, "while": true, "until": true}
	loopOpeners = map[string]bool{"for": true, "select": true}
	closers     = map[string]bool{"fi": true, "done": true}
	inners      = map[string]bool{"then": true, "do": true, "else": true, "elif": true, "{": true, "}": true, "!": true}
)

// keywords strips compound-command keywords and wrappers from the pipeline's
// commands, tracking the nesting of if/while/for bodies (whose commands may not
// run), and returns the commands left. case and function definitions stop the
// analysis (abort).
func (a *shellAnalyzer) keywords(cmds []*simpleCmd) []*simpleCmd {
	var live []*simpleCmd
	for _, c := range cmds {
		for len(c.words) > 0 && c.words[0].lit {
			w := c.words[0].val
			switch {
			case condOpeners[w]:
				a.depth++
				a.res.Other = true
				c.words = c.words[1:] // the condition runs: analyse it (as conditional)
				continue
			case loopOpeners[w]:
				a.depth++
				a.res.Other = true
				c.words = nil
				continue
			case closers[w]:
				a.depth = max(a.depth-1, 0)
				c.words = c.words[1:]
				continue
			case inners[w]:
				c.words = c.words[1:]
				continue
			case w == "case" || w == "function" || w == "esac":
				a.abort = true
				a.res.Other, a.res.Unsure = true, true
				return nil
			}
			break
		}
		stripWrappers(c)
		if len(c.words) > 0 || len(c.redirs) > 0 {
			live = append(live, c)
		}
	}
	return live
}

// pipeline interprets one pipeline. cond marks a pipeline that may not run (it sits
// next to ||).
func (a *shellAnalyzer) pipeline(cmds []*simpleCmd, cond bool) {
	if a.abort {
		return
	}
	live := a.keywords(cmds)
	if a.abort || len(live) == 0 {
		return
	}
	cond = cond || a.depth > 0
	first, last := live[0], live[len(live)-1]
	if len(live) == 1 && a.single(first, cond) {
		return
	}
	reads, kind := a.reader(first)
	win := Range{}
	for _, c := range live[1:] {
		name := cmdName(c)
		if name == "tee" {
			a.editTargets(c.words[1:], false)
			continue
		}
		switch kind {
		case kindRead:
			if w, ok := filterWindow(c, win); ok {
				win = w
			} else if searchCmds[name] || name == "wc" {
				kind = kindSearch
			} else {
				kind = kindOther
			}
		case kindBenign:
			if searchCmds[name] {
				kind = kindSearch
			} else {
				kind = kindOther
			}
		}
	}
	stdoutToFile := false
	for _, c := range live {
		for _, r := range c.redirs {
			a.redirection(c, r, len(live) == 1, &stdoutToFile, c == last)
		}
	}
	switch kind {
	case kindSearch:
		a.res.Search = true
	case kindOther:
		a.res.Other = true
	case kindRead:
		if stdoutToFile {
			return // cat a > b copies; nothing reaches the output
		}
		if len(reads) == 0 {
			return
		}
		if cond || (!win.whole() && len(reads) > 1) {
			// may not run, or a window over several concatenated files
			a.res.Unsure = true
			return
		}
		for _, r := range reads {
			r.Range = composeRange(r.Range, win)
			a.res.Ops = append(a.res.Ops, r)
		}
	}
}

// single handles one-command pipelines with special meaning (cd, nested shells,
// apply_patch, editors); it reports whether it consumed the command.
func (a *shellAnalyzer) single(c *simpleCmd, cond bool) bool {
	args := c.args()
	if len(args) == 0 {
		return false
	}
	name := cmdName(c)
	switch name {
	case "cd", "pushd", "chdir":
		if len(args) < 2 {
			a.known = false
			return true
		}
		t := c.words[1]
		if len(args) > 2 || !t.lit || t.val == "-" {
			a.known = false
			return true
		}
		if a.known {
			a.dir = paths.Normalize(t.val, a.dir)
		} else if strings.HasPrefix(paths.Slash(t.val), "/") {
			a.dir, a.known = paths.Normalize(t.val, ""), true
		}
		return true
	case "popd":
		a.known = false
		return true
	case "bash", "sh", "zsh", "dash", "ksh":
		for i := 1; i+1 < len(args); i++ {
			f := args[i]
			if strings.HasPrefix(f, "-") && !strings.HasPrefix(f, "--") && strings.Contains(f, "c") {
				sub := &shellAnalyzer{res: a.res, dir: a.dir, known: a.known, depth: a.depth}
				if cond {
					sub.depth++
				}
				if !sub.run(args[i+1]) {
					a.res.Other = true
				}
				return true
			}
		}
		return false
	case "apply_patch", "applypatch":
		text := ""
		if body, _, ok := c.stdin(); ok {
			text = body
		} else if len(args) > 1 {
			text = args[1]
		}
		ops := ParsePatch(text, a.pathDir())
		if len(ops) == 0 {
			a.res.Other = true
		}
		for _, op := range ops {
			if op.Kind == Write {
				a.res.Writes++
			}
			a.res.Ops = append(a.res.Ops, op)
		}
		return true
	case "sed":
		if o := parseSed(args[1:]); o.inPlace {
			a.editTargets(wordsFor(c, o.files), false)
			a.redirectsOnly(c)
			return true
		}
	case "perl":
		if files, ok := perlInPlace(args[1:]); ok {
			a.editTargets(wordsFor(c, files), false)
			a.redirectsOnly(c)
			return true
		}
	case "rm", "unlink", "truncate", "dos2unix", "unix2dos", "shred":
		a.editTargets(c.words[1:], name == "truncate")
		a.redirectsOnly(c)
		return true
	case "mv", "cp", "install":
		files := nonFlags(c.words[1:], nil)
		if name == "cp" || name == "install" {
			if len(files) >= 2 {
				files = files[len(files)-1:]
			} else {
				files = nil
			}
		}
		a.editTargets(files, false)
		a.redirectsOnly(c)
		return true
	case "git":
		if len(args) > 1 && (args[1] == "rm" || args[1] == "mv") {
			a.editTargets(nonFlags(c.words[2:], nil), false)
			a.res.Other = true
			a.redirectsOnly(c)
			return true
		}
		if len(args) > 1 && (args[1] == "checkout" || args[1] == "restore") {
			a.gitRevert(c)
			a.res.Other = true
			a.redirectsOnly(c)
			return true
		}
	case "tee":
		body, lit, ok := c.stdin()
		appendMode := false
		for _, w := range c.words[1:] {
			if w.val == "-a" || w.val == "--append" {
				appendMode = true
			}
		}
		if ok && lit && !appendMode {
			for _, w := range nonFlags(c.words[1:], nil) {
				if p, ok := a.path(w); ok {
					a.res.Writes++
					a.res.Ops = append(a.res.Ops, Op{Kind: Write, Path: p, Content: body})
				}
			}
		} else {
			a.editTargets(c.words[1:], false)
		}
		a.redirectsOnly(c)
		return true
	case "echo", "printf", "true", ":", "false", "set", "export", "unset", "wait", "sleep", "clear", "exit", "source", ".":
		toFile := false
		for _, r := range c.redirs {
			a.redirection(c, r, true, &toFile, true)
		}
		if name == "source" || name == "." {
			a.res.Other = true
		}
		return true
	}
	return false
}

// redirectsOnly records the edit targets of c's output redirections.
func (a *shellAnalyzer) redirectsOnly(c *simpleCmd) {
	toFile := false
	for _, r := range c.redirs {
		a.redirection(c, r, false, &toFile, true)
	}
}

// redirection records what one redirection does to files. contentKnown commands
// (a lone cat with a heredoc, a literal echo) turn `>` into a write with content.
func (a *shellAnalyzer) redirection(c *simpleCmd, r redirect, alone bool, stdoutToFile *bool, last bool) {
	switch r.op {
	case ">", ">|", ">>", "&>", "&>>", ">&":
	case "<":
		return
	default:
		return
	}
	if r.op == ">&" && (r.target.val == "" || isDigits(r.target.val) || r.target.val == "-") {
		return
	}
	target := r.target
	if devPath(target.val) {
		if (r.fd == "" || r.fd == "1") && last {
			*stdoutToFile = true
		}
		return
	}
	if (r.fd == "" || r.fd == "1" || r.op == "&>" || r.op == "&>>") && last {
		*stdoutToFile = true
	}
	p, ok := a.path(target)
	if !ok {
		return
	}
	if r.op == ">" || r.op == ">|" {
		if r.fd == "" || r.fd == "1" {
			if content, ok := literalOutput(c, alone); ok {
				a.res.Writes++
				a.res.Ops = append(a.res.Ops, Op{Kind: Write, Path: p, Content: content})
				return
			}
		}
	}
	a.res.Ops = append(a.res.Ops, Op{Kind: Edit, Path: p})
}

// literalOutput returns what c prints when that is known without running it: a lone
// `cat` (or `tee`) fed a literal heredoc, or `echo` with literal arguments.
func literalOutput(c *simpleCmd, alone bool) (string, bool) {
	if !alone {
		return "", false
	}
	args := c.args()
	switch cmdName(c) {
	case "cat":
		if len(args) > 1 && !(len(args) == 2 && args[1] == "-") {
			return "", false
		}
		body, lit, ok := c.stdin()
		if !ok || !lit {
			return "", false
		}
		return body, true
	case "echo":
		for _, w := range c.words[1:] {
			if !w.lit || strings.HasPrefix(w.val, "-") {
				return "", false
			}
		}
		return strings.Join(args[1:], " ") + "\n", true
	}
	return "", false
}

// editTargets records an edit op on each literal path among words (flags skipped).
// sized skips the argument of -s (truncate -s N f).
func (a *shellAnalyzer) editTargets(words []shTok, sized bool) {
	skipNext := false
	dashdash := false
	for _, w := range words {
		if skipNext {
			skipNext = false
			continue
		}
		if !dashdash && w.val == "--" {
			dashdash = true
			continue
		}
		if !dashdash && strings.HasPrefix(w.val, "-") && len(w.val) > 1 {
			if sized && (w.val == "-s" || w.val == "--size") {
				skipNext = true
			}
			continue
		}
		if p, ok := a.path(w); ok {
			a.res.Ops = append(a.res.Ops, Op{Kind: Edit, Path: p})
		}
	}
}

// gitRevert records `git checkout -- f`, `git checkout f.py`, `git restore f` as edits.
func (a *shellAnalyzer) gitRevert(c *simpleCmd) {
	ws := c.words[2:]
	restore := c.words[1].val == "restore"
	var files []shTok
	dashdash := -1
	for i, w := range ws {
		if w.val == "--" {
			dashdash = i
			break
		}
	}
	switch {
	case dashdash >= 0:
		files = ws[dashdash+1:]
	case restore:
		files = nonFlags(ws, map[string]bool{"-s": true, "--source": true})
	default:
		for _, w := range nonFlags(ws, map[string]bool{"-b": true, "-B": true}) {
			if strings.Contains(path.Base(w.val), ".") && !strings.Contains(w.val, "..") {
				files = append(files, w)
			}
		}
	}
	for _, w := range files {
		if p, ok := a.path(w); ok {
			a.res.Ops = append(a.res.Ops, Op{Kind: Edit, Path: p})
		}
	}
}

// nonFlags returns the words that are not flags; withArg names flags that take the
// next word as their value.
func nonFlags(ws []shTok, withArg map[string]bool) []shTok {
	var out []shTok
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if strings.HasPrefix(w.val, "-") && len(w.val) > 1 {
			if withArg[w.val] {
				i++
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

// pathDir is the directory for relative paths, "" when unknown.
func (a *shellAnalyzer) pathDir() string {
	if !a.known {
		return "\x00"
	}
	return a.dir
}

// path resolves a word to a normalised file path; false for expansions, devices and
// relative paths under an unknown directory.
func (a *shellAnalyzer) path(w shTok) (string, bool) {
	if !w.lit || w.val == "" || w.val == "-" || devPath(w.val) {
		return "", false
	}
	abs := strings.HasPrefix(paths.Slash(w.val), "/") || strings.HasPrefix(w.val, "~")
	if !a.known && !abs {
		return "", false
	}
	return paths.Normalize(w.val, a.dir), true
}

func devPath(p string) bool {
	return strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "/proc/") || p == "nul" || p == "NUL"
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// stripWrappers removes leading variable assignments and wrapper commands (sudo,
// time, nice, timeout, env, command, exec, nohup) from c.
func stripWrappers(c *simpleCmd) {
	for len(c.words) > 0 {
		w := c.words[0].val
		if i := strings.IndexByte(w, '='); i > 0 && isName(w[:i]) {
			c.words = c.words[1:]
			continue
		}
		switch w {
		case "sudo", "time", "nohup", "command", "builtin", "exec", "noglob":
			c.words = c.words[1:]
			for len(c.words) > 0 && strings.HasPrefix(c.words[0].val, "-") {
				c.words = c.words[1:]
			}
			continue
		case "env":
			c.words = c.words[1:]
			for len(c.words) > 0 && (strings.HasPrefix(c.words[0].val, "-") || strings.Contains(c.words[0].val, "=")) {
				c.words = c.words[1:]
			}
			continue
		case "nice", "timeout", "stdbuf":
			c.words = c.words[1:]
			for len(c.words) > 0 && strings.HasPrefix(c.words[0].val, "-") {
				c.words = c.words[1:]
			}
			if w == "timeout" && len(c.words) > 0 {
				c.words = c.words[1:] // the duration
			}
			continue
		}
		return
	}
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || c == '_' || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return s != ""
}

// cmdName is the base name of the command word ("/usr/bin/sed" -> "sed").
func cmdName(c *simpleCmd) string {
	if len(c.words) == 0 {
		return ""
	}
	n := c.words[0].val
	if i := strings.LastIndexAny(n, `/\`); i >= 0 {
		n = n[i+1:]
	}
	return strings.TrimSuffix(strings.ToLower(n), ".exe")
}

type cmdKind int

const (
	kindOther cmdKind = iota
	kindRead
	kindSearch
	kindBenign
)

// searchCmds list and search; their output names files and lines but is no read.
var searchCmds = map[string]bool{
	"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true,
	"find": true, "fd": true, "fdfind": true, "ls": true, "tree": true, "locate": true,
	"dir": true, "exa": true, "eza": true, "lsd": true, "which": true, "whereis": true,
	"git-grep": true,
}

// filterCmds may follow a reader in a pipeline without changing what it is.
var filterCmds = map[string]bool{"head": true, "tail": true, "sed": true, "nl": true, "cat": true, "tee": true}

// reader classifies the first command of a pipeline: the files it prints and how.
func (a *shellAnalyzer) reader(c *simpleCmd) ([]Op, cmdKind) {
	args := c.args()
	if len(args) == 0 {
		// a bare redirection (`> f`) truncates f
		return nil, kindBenign
	}
	name := cmdName(c)
	var files []shTok
	r := Range{}
	switch name {
	case "cat", "less", "more", "bat", "batcat":
		var ok bool
		files, r, ok = catArgs(c.words[1:], name)
		if !ok {
			return nil, kindOther
		}
		if len(files) == 0 {
			// cat < f reads f; cat <<EOF prints the heredoc
			for _, rd := range c.redirs {
				if rd.op == "<" {
					files = append(files, rd.target)
				}
			}
			if len(files) == 0 {
				return nil, kindBenign
			}
		}
	case "nl":
		files = nonFlags(c.words[1:], map[string]bool{"-b": true, "-d": true, "-f": true, "-h": true, "-i": true, "-l": true, "-n": true, "-s": true, "-v": true, "-w": true})
		for _, rd := range c.redirs {
			if rd.op == "<" && len(files) == 0 {
				files = append(files, rd.target)
			}
		}
	case "head", "tail":
		var ok bool
		files, r, ok = headTailArgs(c.words[1:], name == "tail")
		if !ok {
			return nil, kindOther
		}
	case "sed":
		o := parseSed(args[1:])
		if o.inPlace || !o.quiet || !o.prints {
			if o.quiet && !o.inPlace && o.parsed {
				return nil, kindSearch // sed -n 's/x/y/p' f prints matching lines
			}
			return nil, kindOther
		}
		files = wordsFor(c, o.files)
		if len(files) > 1 {
			// sed numbers the lines of all its files as one stream
			a.res.Unsure = true
			return nil, kindRead
		}
		if len(o.ranges) > 1 {
			if len(files) == 0 {
				return nil, kindOther
			}
			p, ok := a.path(files[0])
			if !ok {
				a.res.Unsure = true
				return nil, kindRead
			}
			ops := make([]Op, 0, len(o.ranges))
			for _, rr := range o.ranges {
				ops = append(ops, Op{Kind: Read, Path: p, Range: rr})
			}
			return ops, kindRead
		}
		if len(o.ranges) == 1 {
			r = o.ranges[0]
		}
	case "awk", "gawk", "mawk":
		var ok bool
		files, r, ok = awkRange(c.words[1:])
		if !ok {
			return nil, kindOther
		}
		if len(files) > 1 {
			a.res.Unsure = true // NR counts across files
			return nil, kindRead
		}
	case "git":
		if len(args) > 1 && (args[1] == "grep" || args[1] == "ls-files") {
			return nil, kindSearch
		}
		return nil, kindOther
	default:
		if searchCmds[name] {
			return nil, kindSearch
		}
		return nil, kindOther
	}
	if len(files) == 0 {
		return nil, kindOther // reads stdin
	}
	var ops []Op
	for _, w := range files {
		p, ok := a.path(w)
		if !ok {
			a.res.Unsure = true
			continue
		}
		ops = append(ops, Op{Kind: Read, Path: p, Range: r})
	}
	return ops, kindRead
}

// wordsFor maps argument strings back to their tokens (by position from the end,
// which is where sed and perl put their files).
func wordsFor(c *simpleCmd, files []string) []shTok {
	if len(files) == 0 {
		return nil
	}
	ws := c.words[len(c.words)-len(files):]
	return ws
}

// catArgs parses cat/less/more/bat arguments: flags are skipped, except that bat's
// --line-range/-r a:b narrows the range.
func catArgs(ws []shTok, name string) ([]shTok, Range, bool) {
	var files []shTok
	r := Range{}
	dashdash := false
	for i := 0; i < len(ws); i++ {
		v := ws[i].val
		if !dashdash && v == "--" {
			dashdash = true
			continue
		}
		if !dashdash && strings.HasPrefix(v, "-") && len(v) > 1 {
			if (name == "bat" || name == "batcat") && (v == "-r" || v == "--line-range") && i+1 < len(ws) {
				i++
				rr, ok := colonRange(ws[i].val)
				if !ok {
					return nil, r, false
				}
				r = rr
			} else if strings.HasPrefix(v, "--line-range=") {
				rr, ok := colonRange(strings.TrimPrefix(v, "--line-range="))
				if !ok {
					return nil, r, false
				}
				r = rr
			} else if name == "bat" || name == "batcat" {
				if v == "-l" || v == "--language" || v == "--style" || v == "--theme" || v == "-H" {
					i++
				}
			}
			continue
		}
		files = append(files, ws[i])
	}
	return files, r, true
}

// colonRange parses bat's "a:b", "a:" and ":b".
func colonRange(s string) (Range, bool) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return Range{}, false
		}
		return Range{Start: n, End: n}, true
	}
	r := Range{Start: 1}
	if a != "" {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			return Range{}, false
		}
		r.Start = n
	}
	if b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < r.Start {
			return Range{}, false
		}
		r.End = n
	}
	return r, true
}

// headTailArgs parses head/tail arguments into files and the window they show.
// head: -n N, -nN, -N, --lines=N (default 10) -> lines 1..N; tail: the last N lines
// (Range.tail()), or `-n +K` -> lines K..end. Byte counts (-c) and negative head
// counts show lines the call cannot name (Range.unknown()); tail -f is not a read.
func headTailArgs(ws []shTok, tail bool) ([]shTok, Range, bool) {
	n, plus, unknown := 10, false, false
	var files []shTok
	setN := func(v string) bool {
		if strings.HasPrefix(v, "+") {
			plus = true
			v = v[1:]
		} else if strings.HasPrefix(v, "-") {
			unknown = true
			return true
		}
		k, err := strconv.Atoi(v)
		if err != nil {
			return false
		}
		n = k
		return true
	}
	for i := 0; i < len(ws); i++ {
		v := ws[i].val
		switch {
		case v == "-n" || v == "--lines":
			if i+1 >= len(ws) || !setN(ws[i+1].val) {
				return nil, Range{}, false
			}
			i++
		case strings.HasPrefix(v, "--lines="):
			if !setN(strings.TrimPrefix(v, "--lines=")) {
				return nil, Range{}, false
			}
		case strings.HasPrefix(v, "-n") && len(v) > 2:
			if !setN(v[2:]) {
				return nil, Range{}, false
			}
		case v == "-c" || v == "--bytes":
			unknown = true
			i++
		case strings.HasPrefix(v, "-c") || strings.HasPrefix(v, "--bytes="):
			unknown = true
		case tail && (v == "-f" || v == "-F" || v == "--follow" || strings.HasPrefix(v, "--follow=")):
			return nil, Range{}, false
		case len(v) > 1 && v[0] == '-' && isDigits(v[1:]):
			k, _ := strconv.Atoi(v[1:])
			n = k
		case tail && len(v) > 1 && v[0] == '+' && isDigits(v[1:]) && len(files) == 0:
			k, _ := strconv.Atoi(v[1:])
			n, plus = k, true
		case v == "-q" || v == "-v" || v == "--quiet" || v == "--silent" || v == "--verbose" || v == "--":
		case strings.HasPrefix(v, "-") && len(v) > 1:
			return nil, Range{}, false
		default:
			files = append(files, ws[i])
		}
	}
	switch {
	case unknown:
		return files, unknownRange(), true
	case n <= 0 && !plus:
		return files, unknownRange(), true
	case tail && plus:
		return files, Range{Start: max(n, 1)}, true
	case tail:
		return files, tailRange(n), true
	default:
		return files, Range{Start: 1, End: n}, true
	}
}

// sedOpts is what parseSed found in a sed argument list.
type sedOpts struct {
	quiet   bool     // -n
	inPlace bool     // -i, -i.bak, -i '', --in-place
	parsed  bool     // the script was understood
	prints  bool     // every script command prints an address range (N,Mp)
	ranges  []Range  // the ranges printed, in script order
	files   []string // file operands
}

var (
	sedPrint = regexp.MustCompile(`^(\d+|\$)(?:\s*,\s*(\d+|\$|\+\d+))?\s*p$`)
	sedRegex = regexp.MustCompile(`^(\d+|\$|/(?:[^/\\]|\\.)*/)(?:\s*,\s*(\d+|\$|\+\d+|/(?:[^/\\]|\\.)*/))?\s*p$`)
)

// parseSed parses sed's options, script and files.
func parseSed(args []string) sedOpts {
	var o sedOpts
	var scripts []string
	explicit := false
	var rest []string
	for i := 0; i < len(args); i++ {
		v := args[i]
		switch {
		case v == "-n" || v == "--quiet" || v == "--silent":
			o.quiet = true
		case v == "-e" || v == "--expression":
			if i+1 < len(args) {
				scripts = append(scripts, args[i+1])
				i++
			}
			explicit = true
		case strings.HasPrefix(v, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(v, "--expression="))
			explicit = true
		case v == "-f" || v == "--file":
			i++
			explicit = true
			o.parsed = false
			scripts = append(scripts, "\x00") // unknown script
		case v == "-i" || v == "--in-place":
			o.inPlace = true
			// BSD sed takes the backup suffix as the next argument: -i '' or -i .bak
			if i+1 < len(args) && (args[i+1] == "" || bsdSuffix.MatchString(args[i+1])) {
				i++
			}
		case strings.HasPrefix(v, "--in-place="):
			o.inPlace = true
		case strings.HasPrefix(v, "-") && len(v) > 1 && !strings.HasPrefix(v, "--") && v != "-":
			// a flag cluster: -n, -E, -r, -s, -u, -z, -ni, -i.bak, -ie
			flags := v[1:]
			for k := 0; k < len(flags); k++ {
				switch flags[k] {
				case 'n':
					o.quiet = true
				case 'i':
					o.inPlace = true
					k = len(flags) // the rest is a suffix
				case 'e':
					if k == len(flags)-1 && i+1 < len(args) {
						scripts = append(scripts, args[i+1])
						i++
						explicit = true
					}
				case 'l':
					k = len(flags)
					if k == 2 && i+1 < len(args) {
						i++
					}
				}
			}
		case strings.HasPrefix(v, "--"):
		default:
			rest = append(rest, v)
		}
	}
	if !explicit && len(rest) > 0 {
		scripts = append(scripts, rest[0])
		rest = rest[1:]
	}
	o.files = rest
	if len(scripts) == 0 {
		return o
	}
	o.parsed = true
	o.prints = true
	for _, s := range scripts {
		if s == "\x00" {
			o.parsed, o.prints = false, false
			break
		}
		for _, cmd := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
			cmd = strings.TrimSpace(cmd)
			if cmd == "" {
				continue
			}
			if m := sedPrint.FindStringSubmatch(cmd); m != nil {
				o.ranges = append(o.ranges, sedRange(m[1], m[2]))
				continue
			}
			if sedRegex.MatchString(cmd) {
				o.ranges = append(o.ranges, unknownRange())
				continue
			}
			o.prints = false
		}
	}
	if len(o.ranges) == 0 {
		o.prints = false
	}
	return o
}

var bsdSuffix = regexp.MustCompile(`^\.[A-Za-z0-9_~.-]*$`)

// sedRange converts sed addresses to a Range: "a" -> a..a, "a,b", "a,$" -> a..end,
// "$" -> last line, "a,+n" -> a..a+n.
func sedRange(a, b string) Range {
	if a == "$" {
		if b == "" || b == "$" {
			return tailRange(1)
		}
		return tailRange(1) // $,N prints just the last line
	}
	s, _ := strconv.Atoi(a)
	s = max(s, 1)
	switch {
	case b == "":
		return Range{Start: s, End: s}
	case b == "$":
		return Range{Start: s}
	case strings.HasPrefix(b, "+"):
		n, _ := strconv.Atoi(b[1:])
		return Range{Start: s, End: s + n}
	default:
		e, _ := strconv.Atoi(b)
		if e < s {
			return Range{Start: s, End: s} // sed prints just line a
		}
		return Range{Start: s, End: e}
	}
}

var awkNR = []*regexp.Regexp{
	regexp.MustCompile(`^F?NR>=(\d+)&&F?NR<=(\d+)(?:\{print(?:\$0)?;?\})?$`),
	regexp.MustCompile(`^F?NR==(\d+),F?NR==(\d+)(?:\{print(?:\$0)?;?\})?$`),
	regexp.MustCompile(`^F?NR>(\d+)&&F?NR<(\d+)(?:\{print(?:\$0)?;?\})?$`),
	regexp.MustCompile(`^F?NR==(\d+)(?:\{print(?:\$0)?;?\})?$`),
}

// awkRange recognises awk programs that print a line range: NR>=a && NR<=b,
// NR==a,NR==b, NR>a && NR<b, NR==a (each optionally with {print}).
func awkRange(ws []shTok) ([]shTok, Range, bool) {
	var prog string
	var files []shTok
	for i := 0; i < len(ws); i++ {
		v := ws[i].val
		if prog == "" && (v == "-F" || v == "-v") {
			i++
			continue
		}
		if prog == "" && strings.HasPrefix(v, "-") && len(v) > 1 {
			if v == "-f" {
				return nil, Range{}, false
			}
			continue
		}
		if prog == "" {
			prog = v
			continue
		}
		files = append(files, ws[i])
	}
	p := strings.Join(strings.Fields(prog), "")
	for k, re := range awkNR {
		m := re.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		a, _ := strconv.Atoi(m[1])
		switch k {
		case 2:
			b, _ := strconv.Atoi(m[2])
			return files, Range{Start: a + 1, End: b - 1}, a+1 <= b-1
		case 3:
			return files, Range{Start: a, End: a}, a >= 1
		default:
			b, _ := strconv.Atoi(m[2])
			return files, Range{Start: max(a, 1), End: b}, b >= a
		}
	}
	return nil, Range{}, false
}

// perlInPlace returns the files of `perl -i`/`perl -pi -e '…' files`.
func perlInPlace(args []string) ([]string, bool) {
	inPlace := false
	script := false
	var files []string
	for i := 0; i < len(args); i++ {
		v := args[i]
		if strings.HasPrefix(v, "-") && len(v) > 1 && !script {
			if strings.HasPrefix(v, "-M") || strings.HasPrefix(v, "-I") || strings.HasPrefix(v, "-m") {
				continue
			}
			flags := v[1:]
			for k := 0; k < len(flags); k++ {
				switch flags[k] {
				case 'i':
					inPlace = true
					k = len(flags)
				case 'e', 'E':
					if i+1 < len(args) {
						i++
						script = true
					}
					k = len(flags)
				}
			}
			continue
		}
		if !script {
			script = true // perl script.pl … — not an in-place edit
			return nil, false
		}
		files = append(files, v)
	}
	return files, inPlace && script
}

// filterWindow applies a pipeline filter to the window of lines a reader printed.
// It reports false for a command that is not a line-window filter.
func filterWindow(c *simpleCmd, w Range) (Range, bool) {
	args := c.args()
	switch cmdName(c) {
	case "nl", "cat":
		files := nonFlags(c.words[1:], map[string]bool{"-b": true, "-w": true, "-s": true, "-v": true, "-n": true, "-i": true})
		return w, len(files) == 0
	case "head", "tail":
		files, r, ok := headTailArgs(c.words[1:], cmdName(c) == "tail")
		if !ok || len(files) > 0 {
			return w, false
		}
		return windowOf(w, r), true
	case "sed":
		o := parseSed(args[1:])
		if o.inPlace || !o.quiet || !o.prints || len(o.files) > 0 || len(o.ranges) != 1 {
			return w, false
		}
		return windowOf(w, o.ranges[0]), true
	case "tee":
		return w, true
	}
	return w, false
}

// windowOf applies the relative window r (lines of the input stream) to w (file lines
// the stream holds).
func windowOf(w, r Range) Range {
	if w.unknown() || r.unknown() {
		return unknownRange()
	}
	if r.whole() {
		return w
	}
	if w.whole() {
		return r
	}
	if w.tail() > 0 {
		if r.tail() > 0 {
			return tailRange(min(r.tail(), w.tail()))
		}
		return unknownRange()
	}
	ws := max(w.Start, 1)
	if r.tail() > 0 {
		if w.End == 0 {
			return unknownRange()
		}
		return Range{Start: max(ws, w.End-r.tail()+1), End: w.End}
	}
	s := ws + max(r.Start, 1) - 1
	if w.End != 0 && s > w.End {
		return unknownRange() // nothing printed
	}
	e := 0
	if r.End != 0 {
		e = ws + r.End - 1
	}
	if w.End != 0 && (e == 0 || e > w.End) {
		e = w.End
	}
	return Range{Start: s, End: e}
}

// composeRange applies a pipeline window to the range a reader itself selected.
func composeRange(own, win Range) Range {
	if win.whole() {
		return own
	}
	return windowOf(own, win)
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
