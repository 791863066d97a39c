"""Random search for two points of the sa cluster model (weights 1/2, beta = 1, d = 3)
whose angle swings for ever without merging: prints the draws whose cos<y1, y2> varies by more
than 0.5 over t in [200, 400] and never comes within 0.995. swinging-pairs.toml is draw 51 of
`python3 search_pairs.py 1 60` (A, V, and as the start the two points it printed, reached at
t = 400; each pair of tokens starts at one point, so the pairs stay tight clusters exactly). Pure Python, classical RK4, h = 0.05."""
import random, math, sys
seed=int(sys.argv[1]); draws=int(sys.argv[2])
rng=random.Random(seed)
def mv(M,x): return [sum(M[i][j]*x[j] for j in range(3)) for i in range(3)]
def dot(a,b): return a[0]*b[0]+a[1]*b[1]+a[2]*b[2]
def norm(a):
    r=math.sqrt(dot(a,a)); return [v/r for v in a]
def field(A,V,beta,ys):
    out=[]
    for a in ys:
        q=mv([list(r) for r in zip(*A)],a)  # A^T a
        s=[beta*dot(q,b) for b in ys]; m=max(s); w=[math.exp(v-m) for v in s]; t=sum(w)
        mean=[sum(w[k]*ys[k][i] for k in range(len(ys)))/t for i in range(3)]
        f=mv(V,mean); r=dot(a,f)
        out.append([f[i]-r*a[i] for i in range(3)])
    return out
def step(A,V,beta,ys,h):
    k1=field(A,V,beta,ys)
    y2=[[ys[p][i]+h/2*k1[p][i] for i in range(3)] for p in range(2)]; k2=field(A,V,beta,y2)
    y3=[[ys[p][i]+h/2*k2[p][i] for i in range(3)] for p in range(2)]; k3=field(A,V,beta,y3)
    y4=[[ys[p][i]+h*k3[p][i] for i in range(3)] for p in range(2)]; k4=field(A,V,beta,y4)
    return [norm([ys[p][i]+h/6*(k1[p][i]+2*k2[p][i]+2*k3[p][i]+k4[p][i]) for i in range(3)]) for p in range(2)]
for k in range(draws):
    A=[[round(rng.gauss(0,1),3) for _ in range(3)] for _ in range(3)]
    V=[[round(rng.gauss(0,1),3) for _ in range(3)] for _ in range(3)]
    beta=1.0
    ys=[norm([rng.gauss(0,1) for _ in range(3)]) for _ in range(2)]
    h=0.05; cs=[]; ok=True
    for i in range(int(400/h)):
        ys=step(A,V,beta,ys,h)
        c=dot(ys[0],ys[1])
        if c>0.995: ok=False; break
        if i*h>200: cs.append(c)
    if ok and cs and max(cs)-min(cs)>0.5:
        print("HIT",k,"A =",A,"V =",V,"y0 =",ys,"c range",min(cs),max(cs),flush=True)
