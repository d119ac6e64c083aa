/**
 * Spellings that deleted a folder outside the workspace unasked (issue 33): each must ask,
 * whatever rule it falls under. `X` is the folder (see `aimedAt`); `cm0gLXJmIFgK` is
 * `rm -rf X` in base64.
 */
export const ISSUE_ATTACKS: string[] = [
  "echo hi\nrm -rf X",
  "{ rm -rf X; }",
  "if true; then rm -rf X; fi",
  "! rm -rf X",
  "echo a#b; rm -rf X",
  "rm --recur -f X",
  "X=rm; $X -rf X",
  'sh -c "$(echo cm0gLXJmIFgK | base64 -d)"',
  "timeout -s KILL 9 rm -rf X",
  "echo X | xargs -I {} rm -rf {}",
  "env -u A rm -rf X",
  "python3 -c 'import shutil; shutil.rmtree(\"X\")'",
  "find X -exec sh -c 'rm -r \"$0\"' {} \\;",
  'f(){ rm -rf "$1"; }; f X',
];

/** More spellings found by trying, beyond the issue's. */
export const MORE_ATTACKS: string[] = [
  "$'\\x72m' -rf X",
  "r\\m -rf X",
  '"r"m -rf X',
  "\\rm -rf X",
  "command rm -rf X",
  "exec rm -rf X",
  "cd / && rm -r -- X",
  "busybox rm -rf X",
  "/bin/rm -rf X",
  "perl -e 'use File::Path; rmtree(\"X\")'",
  'node -e \'require("fs").rmSync("X",{recursive:true})\'',
  'ruby -e \'require "fileutils"; FileUtils.rm_rf("X")\'',
  "php -r 'system(\"rm -rf X\");'",
  "tar --remove-files -cf /dev/null X",
  "rsync -a --delete empty/ X/",
  "until false; do rm -rf X; break; done",
  "case a in a) rm -rf X;; esac",
  "for d in X; do rm -rf $d; done",
  "while true; do rm -rf X; break; done",
  "(rm -rf X)",
  "echo $(rm -rf X)",
  "cat <(rm -rf X)",
  "true && { false || rm -rf X; }",
  "sh <<EOF\nrm -rf X\nEOF",
  "bash <<< 'rm -rf X'",
  "echo 'rm -rf X' | sh",
  "eval 'rm -rf X'",
  'eval "$(echo cm0gLXJmIFgK | base64 -d)"',
  "bash -c \"bash -c 'rm -rf X'\"",
  "nice -n 5 nohup stdbuf -o0 rm -rf X",
  "env -S 'rm -rf' X",
  "env --unset=A rm -rf X",
  "flock /tmp/lock rm -rf X",
  "flock /tmp/lock -c 'rm -rf X'",
  "script -qc 'rm -rf X' /dev/null",
  "watch -n 1 rm -rf X",
  "taskset 1 rm -rf X",
  "unshare -r rm -rf X",
  "chroot / rm -rf X",
  "find X -delete",
  "find X -execdir rm -r {} +",
  "awk 'BEGIN { system(\"rm -rf X\") }'",
  'awk \'BEGIN { print "rm -rf X" | "sh" }\'',
  "time rm -rf X",
  "builtin eval 'rm -rf X'",
  "F=-rf; rm $F X",
  "rm -{r,f} X",
  "/bin/r? -rf X",
  "alias x='rm -rf'\nx X",
  "trap 'rm -rf X' EXIT",
  "xargs rm < list",
  "git -C X clean -fdx",
  "git -c core.pager='rm -rf X' log",
  "echo 'rm -rf X' > s.sh; . <(cat s.sh)",
  "sh -c 'rm -rf X' &",
  "coproc rm -rf X",
  '. /dev/stdin <<< "rm -rf X"',
  "bash /dev/stdin <<< 'rm -rf X'",
  '"$(which rm)" -rf X',
  "bash -o errexit -c 'rm -rf X'",
  "[[ -d X ]] && rm -rf X",
  "timeout -k 5 10 rm -rf X",
  "echo 'rm -rf X' | busybox sh",
  "cat <<EOF | sh\nrm -rf X\nEOF",
  "rm -rf X 2>/dev/null",
  "echo ')",
];

/** The base64 of `rm -rf X⏎` in the spellings above. */
const ENCODED_X = "cm0gLXJmIFgK";

/**
 * `attack` aimed at `dir`: each word `X` that names the folder (not the variable `X` in
 * `X=rm; $X`) becomes `dir`, and the encoded `rm -rf X` encodes `rm -rf dir`.
 */
export function aimedAt(attack: string, dir: string): string {
  const encoded = Buffer.from(`rm -rf ${dir}\n`).toString("base64");
  return attack.replaceAll(ENCODED_X, encoded).replace(/(?<![$\w])X(?![\w=])/g, dir);
}
