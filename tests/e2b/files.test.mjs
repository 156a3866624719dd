// sandbox.files with the unmodified SDK: envd's filesystem.Filesystem (Connect JSON) and /files
// against Glovebox. Write (multipart, several files, octet-stream, gzip), read (text, bytes,
// blob), list, exists, getInfo, makeDir, rename, remove, watchDir, users and paths, and the
// signed URLs of uploadUrl()/downloadUrl() used by a plain fetch.
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
    FileNotFoundError, FileType, FilesystemEventType, InvalidArgumentError, SandboxError,
} from 'e2b';
import { newSandbox, randomName, waitFor } from './lib.mjs';

const every = new Uint8Array(256 * 64).map((_, i) => i % 256);

describe('sandbox.files', () => {
    let sbx;
    const dir = `/home/user/${randomName('files')}`;

    before(async () => {
        sbx = await newSandbox();
        await sbx.files.makeDir(dir);
    });

    test('write a string, read it as text', async () => {
        const info = await sbx.files.write(`${dir}/a.txt`, 'hello files');
        assert.deepEqual([info.path, info.name, info.type], [`${dir}/a.txt`, 'a.txt', FileType.FILE]);
        assert.equal(await sbx.files.read(`${dir}/a.txt`), 'hello files');
    });

    test('write an ArrayBuffer of every byte value, read it as bytes and as a blob', async () => {
        await sbx.files.write(`${dir}/bin`, every.buffer);
        const bytes = await sbx.files.read(`${dir}/bin`, { format: 'bytes' });
        assert.ok(bytes instanceof Uint8Array);
        assert.deepEqual(bytes, every);
        const blob = await sbx.files.read(`${dir}/bin`, { format: 'blob' });
        assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), every);
    });

    test('an empty file round-trips', async () => {
        await sbx.files.write(`${dir}/empty`, '');
        assert.equal(await sbx.files.read(`${dir}/empty`), '');
        assert.equal((await sbx.files.read(`${dir}/empty`, { format: 'bytes' })).length, 0);
    });

    test('write several files in one request, parents made', async () => {
        const infos = await sbx.files.write([
            { path: `${dir}/multi/x.txt`, data: 'x' },
            { path: `${dir}/multi/deeper/y.txt`, data: new TextEncoder().encode('y') },
        ]);
        assert.deepEqual(infos.map((i) => i.path), [`${dir}/multi/x.txt`, `${dir}/multi/deeper/y.txt`]);
        assert.equal(await sbx.files.read(`${dir}/multi/deeper/y.txt`), 'y');
    });

    test('write with useOctetStream and with gzip', async () => {
        await sbx.files.write(`${dir}/octet`, every, { useOctetStream: true });
        assert.deepEqual(await sbx.files.read(`${dir}/octet`, { format: 'bytes' }), every);
        const text = 'compressible '.repeat(10000);
        const info = await sbx.files.write(`${dir}/gz.txt`, text, { gzip: true });
        assert.equal(info.path, `${dir}/gz.txt`);
        assert.equal(await sbx.files.read(`${dir}/gz.txt`, { gzip: true }), text);
    });

    test('read a missing file: FileNotFoundError', async () => {
        await assert.rejects(sbx.files.read(`${dir}/nope`), FileNotFoundError);
    });

    test('exists', async () => {
        assert.equal(await sbx.files.exists(`${dir}/a.txt`), true);
        assert.equal(await sbx.files.exists(`${dir}/nope`), false);
    });

    test('getInfo fields', async () => {
        const i = await sbx.files.getInfo(`${dir}/a.txt`);
        assert.equal(i.name, 'a.txt');
        assert.equal(i.type, FileType.FILE);
        assert.equal(i.path, `${dir}/a.txt`);
        assert.equal(i.size, 11);
        assert.equal(i.mode, 0o644);
        assert.equal(i.permissions, '-rw-r--r--');
        assert.equal(i.owner, 'user');
        assert.equal(i.group, 'user');
        assert.ok(i.modifiedTime instanceof Date && Math.abs(Date.now() - i.modifiedTime) < 600e3);
        const d = await sbx.files.getInfo(dir);
        assert.equal(d.type, FileType.DIR);
        assert.equal(d.permissions[0], 'd');
    });

    test('list with depth', async () => {
        const one = await sbx.files.list(`${dir}/multi`);
        assert.deepEqual(one.map((e) => [e.name, e.type]).sort(), [['deeper', FileType.DIR], ['x.txt', FileType.FILE]]);
        const two = await sbx.files.list(`${dir}/multi`, { depth: 2 });
        assert.deepEqual(two.map((e) => e.path).sort(),
            [`${dir}/multi/deeper`, `${dir}/multi/deeper/y.txt`, `${dir}/multi/x.txt`]);
        await assert.rejects(sbx.files.list(`${dir}/a.txt`), InvalidArgumentError);
    });

    test('makeDir: true, then false when it exists', async () => {
        assert.equal(await sbx.files.makeDir(`${dir}/made/a/b`), true);
        assert.equal(await sbx.files.makeDir(`${dir}/made/a/b`), false);
        assert.equal((await sbx.files.getInfo(`${dir}/made/a`)).type, FileType.DIR);
    });

    test('rename', async () => {
        await sbx.files.write(`${dir}/old`, 'moving');
        const info = await sbx.files.rename(`${dir}/old`, `${dir}/new`);
        assert.equal(info.path, `${dir}/new`);
        assert.equal(info.type, FileType.FILE);
        assert.equal(await sbx.files.exists(`${dir}/old`), false);
        assert.equal(await sbx.files.read(`${dir}/new`), 'moving');
    });

    test('remove, and removing a missing path succeeds', async () => {
        await sbx.files.remove(`${dir}/made`);
        assert.equal(await sbx.files.exists(`${dir}/made`), false);
        await sbx.files.remove(`${dir}/made`);
    });

    test('watchDir: create, write and remove events; recursive', async () => {
        const w = `${dir}/watched`;
        await sbx.files.makeDir(`${w}/sub`);
        const events = [];
        const h = await sbx.files.watchDir(w, (e) => events.push(e), { recursive: true });
        try {
            await sbx.files.write(`${w}/f.txt`, 'one');
            await sbx.files.write(`${w}/sub/g.txt`, 'two');
            await sbx.files.remove(`${w}/f.txt`);
            await waitFor(() => events.some((e) => e.name === 'f.txt' && e.type === FilesystemEventType.REMOVE) &&
                events.some((e) => e.name === 'sub/g.txt' && e.type === FilesystemEventType.WRITE),
            { what: 'watch events' });
            assert.ok(events.some((e) => e.name === 'f.txt' && e.type === FilesystemEventType.CREATE));
            assert.ok(events.some((e) => e.name === 'f.txt' && e.type === FilesystemEventType.WRITE));
        } finally {
            await h.stop();
        }
        await assert.rejects(sbx.files.watchDir(`${dir}/nope`, () => {}), FileNotFoundError);
    });

    test("users: root vs the default 'user', a root-only path", async () => {
        await sbx.files.write(`${dir}/mine`, 'm');
        assert.equal((await sbx.files.getInfo(`${dir}/mine`)).owner, 'user');
        await sbx.files.write('/root/roots', 'r', { user: 'root' });
        assert.equal((await sbx.files.getInfo('/root/roots', { user: 'root' })).owner, 'root');
        assert.equal(await sbx.files.read('/root/roots', { user: 'root' }), 'r');
        await assert.rejects(sbx.files.read('/root/roots'), SandboxError);
        await assert.rejects(sbx.files.write('/root/nope', 'x'), SandboxError);
        await assert.rejects(sbx.files.makeDir('/root/nope'), SandboxError);
    });

    test('relative and ~ paths are under the user\'s home', async () => {
        const name = randomName('rel');
        const info = await sbx.files.write(name, 'relative');
        assert.equal(info.path, `/home/user/${name}`);
        assert.equal(await sbx.files.read(`~/${name}`), 'relative');
        assert.equal((await sbx.files.getInfo(`~/${name}`)).path, `/home/user/${name}`);
        assert.equal((await sbx.files.list('~')).some((e) => e.name === name), true);
        await sbx.files.write(name, 'rooted', { user: 'root' });
        assert.equal(await sbx.files.read(`/root/${name}`, { user: 'root' }), 'rooted');
    });

    test('downloadUrl() and uploadUrl(): signed URLs for a plain fetch', async () => {
        const up = await sbx.uploadUrl(`${dir}/via-url.txt`);
        assert.match(up, /signature=v1_/);
        const form = new FormData();
        form.append('file', new Blob(['uploaded by url']), `${dir}/via-url.txt`);
        const r = await fetch(up, { method: 'POST', body: form });
        assert.equal(r.status, 200);
        assert.equal((await r.json())[0].path, `${dir}/via-url.txt`);

        const down = await sbx.downloadUrl(`${dir}/via-url.txt`);
        const d = await fetch(down);
        assert.equal(d.status, 200);
        assert.equal(await d.text(), 'uploaded by url');

        const tampered = new URL(down);
        tampered.searchParams.set('signature', tampered.searchParams.get('signature').slice(0, -2) + 'AA');
        assert.equal((await fetch(tampered)).status, 401);
        const other = new URL(down);
        other.searchParams.set('path', `${dir}/a.txt`);
        assert.equal((await fetch(other)).status, 401);

        const later = await sbx.downloadUrl(`${dir}/via-url.txt`, { useSignatureExpiration: 600 });
        assert.equal((await fetch(later)).status, 200);
        const expired = await sbx.downloadUrl(`${dir}/via-url.txt`, { useSignatureExpiration: -60 });
        assert.match(expired, /signature_expiration=/);
        const e = await fetch(expired);
        assert.equal(e.status, 401);
        assert.equal((await e.json()).code, 401);
    });
});
