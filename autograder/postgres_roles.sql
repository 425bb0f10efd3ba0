-- Least-privilege roles for a shared PostgreSQL gradebook (autograder/README.md, "PostgreSQL: roles").
-- Run once, as a PostgreSQL superuser:
--     sudo -u postgres psql -v ON_ERROR_STOP=1 -d postgres -f autograder/postgres_roles.sql
-- lesson11_owner owns the database and nbgrader's tables: only the first `make release` (which
-- creates the tables) and nbgrader's schema upgrades (`nbgrader db upgrade`) log in as it.
-- lesson11_grader is what every other command uses (make grade, report, formgrader, export): it
-- reads and writes rows and can create, alter or drop nothing. Give each a password afterwards
-- (\password lesson11_grader) and keep it in ~/.pgpass, never in nbgrader_config.py.
-- tests/grading/test_postgres_roles.py runs this file on a private server and grades as the grader.
CREATE ROLE lesson11_owner LOGIN;
CREATE ROLE lesson11_grader LOGIN;
CREATE DATABASE lesson11 OWNER lesson11_owner;
REVOKE ALL ON DATABASE lesson11 FROM PUBLIC;
GRANT CONNECT ON DATABASE lesson11 TO lesson11_grader;
\connect lesson11
REVOKE ALL ON SCHEMA public FROM PUBLIC;
ALTER SCHEMA public OWNER TO lesson11_owner;
GRANT USAGE ON SCHEMA public TO lesson11_grader;
ALTER DEFAULT PRIVILEGES FOR ROLE lesson11_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lesson11_grader;
ALTER DEFAULT PRIVILEGES FOR ROLE lesson11_owner IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO lesson11_grader;
