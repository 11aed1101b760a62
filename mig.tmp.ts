import {createSql} from './db/connect'; import {migrate} from './db/migrate'; const s=createSql('postgres://postgres@127.0.0.1:5432/engine_try_app'); await migrate(s); await s.end();
