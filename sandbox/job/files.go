package job

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// defaultFileMode is the mode of a placed file that names none.
const defaultFileMode = 0o644

// checkFiles refuses files that cannot fit the plan's workspace, before
// anything is built: more bytes or entries than the fresh tmpfs holds, or
// a mode beyond permission bits. Paths are checked where they are
// resolved (supervisor.Files), against the workspace itself.
func checkFiles(files []File, pl *plan.Plan) error {
	var total int64
	for _, f := range files {
		if f.Mode&^os.ModePerm != 0 {
			return fmt.Errorf("file %q: mode %#o: only permission bits (0 to 0777)", f.Path, uint32(f.Mode))
		}
		total += int64(len(f.Data))
	}
	if total > pl.Workspace.Size {
		return fmt.Errorf("files of %s in all: more than the workspace holds (%s, limits.workspace_size)", policies.Size(total), policies.Size(pl.Workspace.Size))
	}
	if int64(len(files)) > pl.Workspace.Inodes {
		return fmt.Errorf("%d files: more than the workspace holds (%d entries, limits.workspace_inodes)", len(files), pl.Workspace.Inodes)
	}
	return nil
}

// placeFiles writes files into the prepared sandbox's fresh workspace,
// owned by the program, before it starts.
func placeFiles(sb *supervisor.Sandbox, files []File) error {
	if len(files) == 0 {
		return nil
	}
	ws, err := sb.Files()
	if err != nil {
		return err
	}
	for _, f := range files {
		mode := f.Mode
		if mode == 0 {
			mode = defaultFileMode
		}
		if err := ws.WriteFile(f.Path, f.Data, mode); err != nil {
			return fmt.Errorf("place file: %w", err)
		}
	}
	return nil
}

// collectFiles lists the regular files the workspace holds once the
// program ended, with their sizes ([] when none).
func collectFiles(sb *supervisor.Sandbox) ([]result.File, error) {
	ws, err := sb.Files()
	if err != nil {
		return nil, err
	}
	all, err := ws.Walk()
	if err != nil {
		return nil, fmt.Errorf("list the workspace: %w", err)
	}
	files := []result.File{}
	for _, fi := range all {
		if fi.Type == supervisor.TypeFile {
			files = append(files, result.File{Path: fi.Path, Size: fi.Size})
		}
	}
	return files, nil
}
