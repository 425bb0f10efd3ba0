// Quarto post-render hook (_quarto.yml project.post-render; quarto.org docs/projects/scripts). Runs with the
// Deno inside Quarto, from the project folder: `coursekit site --post-render` with the project's .venv, or
// one line saying how to get it when .venv is missing (a fresh clone).
const python = Deno.build.os === "windows" ? ".venv\\Scripts\\python.exe" : ".venv/bin/python";
try {
  Deno.statSync(python);
} catch {
  console.error(`error: ${python} not found: run \`make site\` (it sets up .venv, builds the branches and the release, then renders)`);
  Deno.exit(1);
}
const run = new Deno.Command(python, {
  args: ["-m", "coursekit", "site", "--post-render"], stdout: "inherit", stderr: "inherit",
}).outputSync();
Deno.exit(run.code);
