# The Node versions CI tests, in one place (sourced by use.sh; read by test/docs/compatibility.test.ts).
# "oldest" is not listed here: it is the floor of package.json's "engines" (>=X.Y → X.Y.0).
NODE_24=24.22.3
NODE_22=22.23.5
