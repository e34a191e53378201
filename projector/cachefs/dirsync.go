package cachefs

import "github.com/syncledger/syncledger/internal/fsx"

// dirSync: a directory is fsynced to make the renames and removals in it
// durable (docs/design.md §9); not on Windows (fsx.DirSync).
const dirSync = fsx.DirSync
