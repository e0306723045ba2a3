package toolcall

// Internals for the external tests (package toolcall_test), which read real
// sessions with package transcript: transcript imports this package, so a test
// inside it could not.
var (
	Elisions     = elisions
	ElisionMin   = elisionMin
	ElisionShift = &elisionShift
	FoldBlock    = foldBlock
	HasElision   = hasElision
)
