package server

// OfferedRecallTool is offeredRecallTool, for the external tests.
var OfferedRecallTool = offeredRecallTool
