package tokencount

// Internals for the external tests (package tokencount_test), which read real
// sessions with package transcript: transcript imports this package, so a test
// inside it could not.
var (
	CountUncached = countTokens
	CountSplit    = countSplit
	SplitO200k    = splitO200k
)

// TokenChunk is tokenChunk.
const TokenChunk = tokenChunk
