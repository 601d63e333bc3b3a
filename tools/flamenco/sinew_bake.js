// SPDX-License-Identifier: GPL-3.0-or-later
//
// Flamenco 3 job type: bake Sinew IK chains and spring meshes on a render farm.
//
// UNTESTED HERE: these machines have no Flamenco Manager or Worker. The command each
// task runs is exactly the one tested in tests/cli/test_cli.py:
//
//   blender -b SCENE.blend --python <sinew>/cli.py -- --frames START END [--objects NAME ...] --save OUT.blend
//
// Install: copy this file into the Manager's `scripts/` folder and restart it. The
// Workers need Sinew's cli.py at the path given in `sinew_cli` (e.g. a shared folder
// holding the unpacked legacy zip, or the installed extension's folder), plus scipy in
// their Blender (the extension zip carries it; see README.md).
//
// One task per object when `per_object` is on (bakes of different objects run on
// different Workers in parallel, each saving its own file); otherwise one task bakes
// every enabled chain and mesh of the file.

const JOB_TYPE = {
  label: "Sinew Bake",
  description: "Bake Sinew IK chains and spring meshes headless and save the baked .blend",
  settings: [
    { key: "blendfile", type: "string", required: true, visible: "web",
      description: "Path of the .blend file to bake" },
    { key: "frames", type: "string", required: true,
      eval: "f'{C.scene.frame_start}-{C.scene.frame_end}'",
      description: "Frame range to bake, as START-END" },
    { key: "objects", type: "string", default: "",
      description: "Comma-separated object names to bake; empty bakes every enabled one" },
    { key: "per_object", type: "bool", default: false,
      description: "One task (and one output file) per object, run in parallel" },
    { key: "sinew_cli", type: "string", required: true, subtype: "file_path",
      description: "Path of Sinew's cli.py as the Workers see it" },
    { key: "output_dir", type: "string", subtype: "dir_path", required: true,
      description: "Folder for the baked .blend files" },
  ],
};

function compileJob(job) {
  const settings = job.settings;
  const range = String(settings.frames).split("-").map((s) => parseInt(s.trim(), 10));
  if (range.length !== 2 || isNaN(range[0]) || isNaN(range[1]) || range[1] < range[0]) {
    throw `frames must be START-END with END >= START, got "${settings.frames}"`;
  }
  const names = String(settings.objects || "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const stem = path.stem(settings.blendfile);

  const groups = settings.per_object && names.length > 0 ? names.map((n) => [n]) : [names];
  for (const group of groups) {
    const suffix = group.length === 1 && settings.per_object ? `_${group[0]}` : "_baked";
    const out = path.join(settings.output_dir, `${stem}${suffix}.blend`);
    const args = ["--python", settings.sinew_cli, "--",
                  "--frames", String(range[0]), String(range[1])];
    if (group.length > 0) {
      args.push("--objects", ...group);
    }
    args.push("--save", out);
    const task = author.Task(`sinew-bake${suffix}`, "blender");
    task.addCommand(author.Command("blender-render", {
      exe: "{blender}",
      exeArgs: "{blenderArgs}",
      argsBefore: [],
      blendfile: settings.blendfile,
      args: args,
    }));
    job.addTask(task);
  }
}
